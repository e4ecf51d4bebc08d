"""Numbers published by others, shipped as data and always shown as published, never as
measured. Source: Profiling Apple Silicon Performance for ML Training (arXiv 2501.14925),
Tables 1, 4, 5 and 6, transcribed from ../shared/seeds/paper-profiling-apple-silicon-ml-training.md."""
from __future__ import annotations

SOURCE = "arXiv 2501.14925 (Profiling Apple Silicon Performance for ML Training)"

#: Table 1: device, memory (GB), fp32 TFLOPS, launch price (USD)
TABLE1 = [
    ("Quadro RTX 4000", 8, 7, 899), ("NVIDIA RTX 2080Ti", 11, 13, 999), ("NVIDIA GeForce RTX 4090", 24, 83, 1599),
    ("NVIDIA RTX A6000", 48, 39, 4650), ("M2 Ultra", 192, 27, 6599), ("M2 Max", 64, 14, 2599), ("M2 Pro", 32, 7, 1999),
]

#: Table 4: GPT2-large pre-training without Hugging Face: testbed, batch, MLX or CUDA s/pass, MPS s/pass
TABLE4 = [("M2 Ultra", 8, 2.710, 3.239), ("M2 Max", 4, 2.924, 3.645), ("M2 Pro", 2, 8.692, 10.704), ("A6000", 8, 2.771, None)]

#: Table 5: GPU energy per iteration (J), Whisper-medium, batch 4, fp32
TABLE5 = [("M2 Ultra", 114.86), ("M2 Max", 129.30), ("A6000", 212.39), ("RTX 4090", 108.58)]

#: Table 6: kernel launch time (ms): testbed, cold launch, follow-up launch
TABLE6 = [("M2 Ultra", 0.7859, 0.1480), ("M2 Max", 0.9080, 0.1273), ("M2 Pro", 0.5850, 0.2637), ("A6000", 0.0225, 0.0064),
          ("RTX 4090", 0.0225, 0.0036), ("2080Ti", 0.0845, 0.0053), ("RTX 4000", 0.1750, 0.0046)]
