"""python -m bench.suite: the community seed suites (BERT matrix, ResNet50 CIFAR100/Food101,
DistilBERT IMDB, LLM generation speed), measured the gapbench way."""
import sys

from gapbench.benchmarks import main

if __name__ == "__main__":
    sys.exit(main("suite"))
