"""Training benchmark: the batches (synthetic, or local data with an optional local tokenizer)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gapbench.core.cases import CaseError
from gapbench.core.result import ERROR, UNAVAILABLE
from gapbench.benchmarks.train.config import Case


def byte_tokens(text: str, vocab: int) -> np.ndarray:
    """Token ids without a tokenizer: the UTF-8 bytes (0-255), folded into the vocabulary.
    Used when no local tokenizer is given; the record says so."""
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64) % vocab


def load_local(path: str, kind: str, vocab: int, tokenizer: str | None, n_mels: int = 80, frames: int = 3000):
    """Real data from a local path: a `datasets` directory (save_to_disk) or a .txt file.
    Text: a "text" (or "sentence") column. Audio: an "audio" column of {"array", "sampling_rate"}
    plus a "sentence" or "text" column for the labels. Returns (items, description)."""
    p = Path(path)
    if not p.exists():
        raise CaseError(ERROR, f"--data {path}: no such file or directory")
    tok = None
    if tokenizer:
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
        except Exception as e:
            raise CaseError(ERROR, f"--tokenizer {tokenizer}: cannot load a local tokenizer ({e})") from None
    encode = (lambda s: np.asarray(tok(s)["input_ids"], dtype=np.int64) % vocab) if tok else (lambda s: byte_tokens(s, vocab))
    how = f"tokenizer {tokenizer}" if tok else "UTF-8 bytes as token ids (no --tokenizer given)"
    if p.is_file() and kind == "text":
        return {"tokens": encode(p.read_text(encoding="utf-8"))}, f"text file {p} ({how})"
    try:
        import datasets
    except ImportError:
        raise CaseError(UNAVAILABLE, "reading a dataset directory needs `datasets` (pip install datasets)") from None
    try:
        ds = datasets.load_from_disk(str(p))
    except Exception as e:
        raise CaseError(ERROR, f"--data {path}: not a dataset saved with save_to_disk ({e})") from None
    if isinstance(ds, datasets.DatasetDict):
        ds = ds["train"] if "train" in ds else ds[next(iter(ds))]
    cols = ds.column_names
    tcol = next((c for c in ("text", "sentence") if c in cols), None)
    if kind == "text":
        if tcol is None:
            raise CaseError(ERROR, f"--data {path}: needs a 'text' or 'sentence' column (has {cols})")
        return {"tokens": np.concatenate([encode(t) for t in ds[tcol]])}, f"dataset {p} [{tcol}] ({how})"
    if "audio" not in cols or tcol is None:
        raise CaseError(ERROR, f"--data {path}: Whisper needs 'audio' and 'sentence'/'text' columns (has {cols})")
    from transformers import WhisperFeatureExtractor

    sr = 16000
    fe = WhisperFeatureExtractor(feature_size=n_mels, sampling_rate=sr, chunk_length=frames * 160 // sr)
    feats, labels = [], []
    for row in ds:
        a = row["audio"]
        if hasattr(a, "get_all_samples"):  # datasets >= 4 decodes Audio columns with torchcodec
            smp = a.get_all_samples()
            a = {"array": np.asarray(smp.data).mean(axis=0), "sampling_rate": smp.sample_rate}
        if int(a["sampling_rate"]) != sr:
            raise CaseError(ERROR, f"--data {path}: audio must be sampled at {sr} Hz (got {a['sampling_rate']}); resample it first")
        feats.append(fe(np.asarray(a["array"], dtype=np.float32), sampling_rate=sr, return_tensors="np")["input_features"][0])
        labels.append(encode(row[tcol]))
    return {"features": feats, "labels": labels}, f"dataset {p} (audio -> log-mel, labels: {how})"


def make_batches(case: Case, family: str, vocab: int, n_mels: int, frames: int, rng: np.random.Generator, n: int = 4):
    """`n` host batches as numpy arrays: synthetic by default, from --data when given."""
    B, T = case.batch_size, case.seq_len
    real, desc = (None, "synthetic (uniform random token ids" + (", Gaussian log-mel features)" if family == "whisper" else ")"))
    if case.data:
        real, desc = load_local(case.data, "audio" if family == "whisper" else "text", vocab, case.tokenizer, n_mels, frames)
    out = []
    for i in range(n):
        if family == "whisper":
            if real is None:
                feats = rng.standard_normal((B, n_mels, frames), dtype=np.float32)
                labels = rng.integers(3, vocab, (B, T))
            else:
                idx = [(i * B + j) % len(real["features"]) for j in range(B)]
                feats = np.stack([real["features"][j] for j in idx]).astype(np.float32)
                labels = np.stack([np.resize(real["labels"][j], T) if len(real["labels"][j]) else np.zeros(T, np.int64)
                                   for j in idx])
            out.append({"input_features": feats, "labels": labels.astype(np.int64)})
        else:
            if real is None:
                toks = rng.integers(0, vocab, (B, T))
            else:
                t = real["tokens"]
                if len(t) < T + 1:
                    t = np.resize(t, T + 1)
                starts = rng.integers(0, len(t) - T, B) if len(t) > T else np.zeros(B, np.int64)
                toks = np.stack([t[s:s + T] for s in starts])
            out.append({"input_ids": toks.astype(np.int64)})
    return out, desc
