"""The tools that work on results rather than measure: `gapbench run` (a bundle of benchmarks in
fresh processes), `report` (pages from result files and bundles), `compare` and `history` (runs
against runs). They sit above the measuring scenarios (gapbench.benchmarks) and start them only
through the command registry (gapbench.benchmarks.get) or in fresh processes."""
