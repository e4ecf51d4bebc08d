"""bench.train: end-to-end training steps, one device or data parallel over several."""
