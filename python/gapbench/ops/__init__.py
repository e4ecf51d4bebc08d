"""The ops gapbench times, one OpSpec per op: shapes, inputs, float64 reference, error bound,
work, and how each framework runs it. Imports gapbench.core and gapbench.backends only."""
