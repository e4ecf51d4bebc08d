"""gapbench: why is ML training slower on this machine, and whose fault is it?

Hand-written CUDA and Metal probes (gapbench._native) next to every framework, in layers that
import one way: gapbench.core (result model, statistics, measurement, processes, CLI),
gapbench.backends (one adapter per framework), gapbench.ops (one OpSpec per op) and
gapbench.models, gapbench.benchmarks (one package per command). `gapbench backends` lists what
this machine has, and why not."""
__version__ = "0.1.0"

__all__ = ["__version__"]
