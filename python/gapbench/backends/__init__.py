"""One adapter per backend: how each framework (and the native probes) is found, allocates,
synchronises and times. Imports gapbench.core only."""
