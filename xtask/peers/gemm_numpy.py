#!/usr/bin/env python3
"""numpy peer of Tessera's `gemm` benchmark suite (run by `cargo xtask bench gemm`).

Multiplies square n x n float32 or float64 matrices (`a @ b`, with `.T` views for the nt and
tn layouts) and prints, one JSON object per line, first
a `{"peer_info": {...}}` line (numpy version, its BLAS, thread count when threadpoolctl is
importable), then one record per size with the same fields as tessera-bench's:
`{"suite":"gemm","framework":"numpy","backend":"cpu","n":...,"reps":...,"median_s":...,
"min_s":...,"max_s":...,"gflops":...}`.

The timing protocol and the record lines are peer_protocol.py's (which mirrors
xtask/src/bench/timing.rs).

Usage: python3 gemm_numpy.py [--sizes 256,512,1024,2048,4096] [--reps N] [--dtypes f32,f64]
                             [--layouts nn,nt,tn]
"""

import argparse
import sys

import numpy as np

import peer_protocol as p


def blas_info():
    """numpy's version, BLAS library and threads, as far as they can be found out."""
    info = {"framework": "numpy", "numpy": np.__version__, "blas": None, "threads": None}
    try:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]
        info["blas"] = f'{blas.get("name")} {blas.get("version", "")}'.strip()
    except (AttributeError, KeyError, TypeError):
        pass
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        info["threads_note"] = "pip install threadpoolctl to report BLAS threads"
        return info
    pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    if pools:
        pool = pools[0]
        info["blas"] = f'{pool.get("internal_api")} {pool.get("version")}'
        info["threads"] = pool.get("num_threads")
        if pool.get("architecture"):
            info["blas_architecture"] = pool["architecture"]
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_gemm_args(parser)
    args = parser.parse_args()
    p.info(blas_info())
    rng = np.random.default_rng(0)
    types = {"f32": np.float32, "f64": np.float64}
    for dtype, layout, n, variant in p.gemm_cases(args):
        a = rng.standard_normal((n, n), dtype=types[dtype])
        b = rng.standard_normal((n, n), dtype=types[dtype])
        if layout == "nt":
            b = b.T
        elif layout == "tn":
            a = a.T
        samples = p.measure(lambda: a @ b, args.reps)
        p.emit("gemm", "numpy", n, samples, flops=2.0 * n**3, variant=variant)
    return 0


if __name__ == "__main__":
    sys.exit(main())
