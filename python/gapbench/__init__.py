"""gapbench: why is ML training slower on this machine, and whose fault is it?

Hand-written CUDA and Metal probes (gapbench._native) next to every framework, with one
result model (gapbench.core.result) and statistics computed in one place (gapbench.core.stats)."""
__version__ = "0.1.0"


def backends(refresh: bool = False):
    """Every backend gapbench knows, with whether it is available here and why not."""
    from gapbench.backends.registry import all_backends

    return all_backends(refresh=refresh)


__all__ = ["__version__", "backends"]
