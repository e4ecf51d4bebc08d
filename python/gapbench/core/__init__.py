"""The layer everything else stands on: typed names, the result model, statistics and the
measurement rules, the native loader, the one process module, the command-line mechanism. It
imports nothing of gapbench above it (backends, ops, models, benchmarks)."""
