"""gapbench compare: rows of result files matched, their change classified (gapbench.core.compare)."""
