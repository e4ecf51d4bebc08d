"""bench.suite: the community seed suites, measured the gapbench way."""
