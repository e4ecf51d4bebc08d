"""Training workloads: GPT-2 and Whisper through transformers (random weights from their
configurations, or a local checkpoint), and gapbench's minimal GPT-2 written the same way in
PyTorch and in MLX (the paper's Table 4 runs "without the Hugging Face platform")."""
