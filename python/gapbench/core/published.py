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

SEED_BERT_SOURCE = "pytorch-apple-silicon-benchmarks README (bert-base-cased, 100 steps, fp32; '-' = out of memory)"
#: (mode, batch, seq) -> {machine: time as published}
SEED_BERT = {
    ("training", 16, 128): {"M1 Max CPU": "2m 29s", "M1 Max GPU": "43s", "V100": "12s", "T4": "31s"},
    ("training", 64, 128): {"M1 Max CPU": "8m 32s", "M1 Max GPU": "90s", "V100": "41s", "T4": "2m"},
    ("training", 256, 128): {"M1 Max CPU": "50m 10s", "M1 Max GPU": "18m 1s", "V100": "-", "T4": "-"},
    ("training", 16, 512): {"M1 Max CPU": "11m 22s", "M1 Max GPU": "2m 20s", "V100": "47s", "T4": "2m 25s"},
    ("training", 64, 512): {"M1 Max CPU": "1h 21m 2s", "M1 Max GPU": "26m 33s", "V100": "-", "T4": "-"},
    ("training", 256, 512): {"M1 Max CPU": "6h 33m 7s", "M1 Max GPU": "175m 4s", "V100": "-", "T4": "-"},
    ("inference", 16, 128): {"M1 Max CPU": "52s", "M1 Max GPU": "37s", "V100": "4s", "T4": "10s"},
    ("inference", 64, 128): {"M1 Max CPU": "3m 2s", "M1 Max GPU": "43s", "V100": "13s", "T4": "44s"},
    ("inference", 256, 128): {"M1 Max CPU": "11m 25s", "M1 Max GPU": "1m 45s", "V100": "54s", "T4": "2m 52s"},
    ("inference", 16, 512): {"M1 Max CPU": "4m 22s", "M1 Max GPU": "46s", "V100": "16s", "T4": "54s"},
    ("inference", 64, 512): {"M1 Max CPU": "17m 51s", "M1 Max GPU": "2m 16s", "V100": "1m 4s", "T4": "3m 24s"},
    ("inference", 256, 512): {"M1 Max CPU": "1h 10m 41s", "M1 Max GPU": "7m 40s", "V100": "4m 10s", "T4": "14m 18s"},
}
