"""bench.blas: copy, GEMV, VJP and GEMM throughput, rung by rung, against the roofline measured here."""
