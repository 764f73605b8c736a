#!/usr/bin/env python3
"""numpy peer of Tessera's `gemm` benchmark suite (run by `cargo xtask bench gemm`).

Multiplies square n x n float32 matrices (`a @ b`) and prints, one JSON object per line, first
a `{"peer_info": {...}}` line (numpy version, its BLAS, thread count when threadpoolctl is
importable), then one record per size with the same fields as tessera-bench's:
`{"suite":"gemm","framework":"numpy","backend":"cpu","n":...,"reps":...,"median_s":...,
"min_s":...,"max_s":...,"gflops":...}`.

The timing protocol mirrors xtask/src/bench/timing.rs: warm up for at least MIN_WARMUP_RUNS runs
and MIN_WARMUP_S seconds, then time `--reps` repetitions (default: enough for TARGET_S seconds,
clamped to [MIN_REPS, MAX_REPS]); report median, min and max. Keep the two in step.

Usage: python3 gemm_numpy.py [--sizes 256,512,1024,2048,4096] [--reps N]
"""

import argparse
import json
import math
import sys
import time

import numpy as np

MIN_WARMUP_RUNS = 2
MIN_WARMUP_S = 0.2
TARGET_S = 1.5
MIN_REPS = 5
MAX_REPS = 1000


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


def reps_for(seconds_per_run):
    wanted = math.ceil(TARGET_S / max(seconds_per_run, 1e-9))
    return max(MIN_REPS, min(MAX_REPS, wanted))


def measure(run, reps):
    """Warm-up, then `reps` timed calls of `run` (None: automatic); returns the sorted times."""

    def timed():
        start = time.perf_counter()
        out = run()
        seconds = time.perf_counter() - start
        del out
        return seconds

    warmup_start = time.perf_counter()
    fastest, runs = math.inf, 0
    while runs < MIN_WARMUP_RUNS or time.perf_counter() - warmup_start < MIN_WARMUP_S:
        fastest = min(fastest, timed())
        runs += 1
    reps = reps if reps is not None else reps_for(fastest)
    return sorted(timed() for _ in range(max(1, reps)))


def median(sorted_samples):
    mid = len(sorted_samples) // 2
    if len(sorted_samples) % 2:
        return sorted_samples[mid]
    return (sorted_samples[mid - 1] + sorted_samples[mid]) / 2


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,512,1024,2048,4096",
                        help="comma-separated matrix sizes n")
    parser.add_argument("--reps", type=positive_int, default=None,
                        help="timed repetitions per size (default: about 1.5 s per size, >= 5)")
    args = parser.parse_args()
    sizes = [positive_int(s) for s in args.sizes.split(",") if s.strip()]

    print(json.dumps({"peer_info": blas_info()}), flush=True)
    rng = np.random.default_rng(0)
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        samples = measure(lambda: a @ b, args.reps)
        med = median(samples)
        record = {
            "suite": "gemm",
            "framework": "numpy",
            "backend": "cpu",
            "n": n,
            "reps": len(samples),
            "median_s": med,
            "min_s": samples[0],
            "max_s": samples[-1],
            "gflops": 2.0 * n**3 / med / 1e9,
        }
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
