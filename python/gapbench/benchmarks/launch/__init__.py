"""bench.launch: kernel-launch latency, cold and warm, raw probe next to every framework."""
