"""gapbench run: every benchmark briefly, into one shareable bundle."""
