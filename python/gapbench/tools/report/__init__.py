"""bench.report: result files of any machines in one page."""
