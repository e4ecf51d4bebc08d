"""python -m bench.report: result files from any number of machines into one report (Markdown,
self-contained HTML, figures) with the paper's published numbers beside ours."""
import sys

from gapbench.benchmarks import main

if __name__ == "__main__":
    sys.exit(main("report"))
