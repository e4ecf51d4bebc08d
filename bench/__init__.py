"""Thin runnable entry points for a checkout: `python -m bench.<suite>`."""
