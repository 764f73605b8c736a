"""What the Python peers of Tessera's benchmark suites share: the timing protocol of
xtask/src/bench/timing.rs (keep the two in step), the record lines they print, and the models'
multiply-add counts of xtask/src/bench/suites/models.rs.

Protocol: warm up for at least MIN_WARMUP_RUNS runs and MIN_WARMUP_S seconds, then time `reps`
repetitions (default: enough for TARGET_S seconds, clamped to [MIN_REPS, MAX_REPS]); report
median, min and max.
"""

import argparse
import json
import math
import os
import time

MIN_WARMUP_RUNS = 2
MIN_WARMUP_S = 0.2
TARGET_S = 1.5
MIN_REPS = 5
MAX_REPS = 1000

# Multiply-adds of each weight layer for one sample's forward pass, input layer first.
LAYER_MACS = {
    "mlp": [784 * 512, 512 * 512, 512 * 10],
    "cnn": [32 * 28 * 28 * 9, 64 * 14 * 14 * 32 * 9, 3136 * 128, 128 * 10],
}


def forward_flops(model):
    """Floating-point operations of one sample's forward pass."""
    return 2.0 * sum(LAYER_MACS[model])


def train_flops(model):
    """Floating-point operations of one sample's training step (forward, weight gradients,
    input gradients of every layer but the first)."""
    macs = LAYER_MACS[model]
    return 2.0 * (3.0 * sum(macs) - macs[0])


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


def int_list(text):
    return [positive_int(s) for s in text.split(",") if s.strip()]


def emit(suite, framework, n, samples, flops=None, samples_counted=False, model=None,
         phase=None, memory=None, variant=None, precision=None, backend="cpu"):
    """Prints one record line with the fields of tessera-bench's records (`memory`: a dict of
    rss_before_bytes, peak_rss_bytes, rss_after_bytes, for the mem and precision suites;
    `precision`: "f32", "bf16" or "f16", for the precision suite; `backend`: where the peer
    computed, "cpu" or "cuda")."""
    med = median(samples)
    record = {
        "suite": suite,
        "framework": framework,
        "backend": backend,
        "n": n,
        "reps": len(samples),
        "median_s": med,
        "min_s": samples[0],
        "max_s": samples[-1],
        "gflops": (flops / med / 1e9) if flops else 0.0,
    }
    if samples_counted:
        record["samples_per_s"] = n / med
    if model is not None:
        record["model"] = model
    if phase is not None:
        record["phase"] = phase
    if variant is not None:
        record["variant"] = variant
    if precision is not None:
        record["precision"] = precision
    if memory is not None:
        record["memory"] = memory
    print(json.dumps(record), flush=True)


def add_gemm_args(parser):
    """The gemm suite's arguments (xtask/src/bench/suites/gemm.rs)."""
    parser.add_argument("--sizes", type=int_list, default=[256, 512, 1024, 2048, 4096],
                        help="comma-separated matrix sizes n")
    parser.add_argument("--reps", type=positive_int, default=None,
                        help="timed repetitions per size (default: about 1.5 s per size, >= 5)")
    parser.add_argument("--dtypes", default="f32", help="comma-separated: f32, f64")
    parser.add_argument("--layouts", default="nn",
                        help="comma-separated: nn (A.B), nt (A.B^T), tn (A^T.B)")


def gemm_cases(args):
    """(dtype name, layout, n, variant) for every case of the gemm suite, in Tessera's order;
    the variant is None for f32 nn, as in gemm.rs."""
    for dtype in [d for d in args.dtypes.split(",") if d]:
        for layout in [l for l in args.layouts.split(",") if l]:
            for n in args.sizes:
                variant = None if (dtype, layout) == ("f32", "nn") else f"{dtype} {layout}"
                yield dtype, layout, n, variant


def requested_threads():
    """The thread count `cargo xtask bench --threads N` asks for (TESSERA_BENCH_THREADS), or
    None for the framework's default."""
    value = os.environ.get("TESSERA_BENCH_THREADS")
    return int(value) if value else None


def info(fields):
    """Prints the `{"peer_info": {...}}` line."""
    print(json.dumps({"peer_info": fields}), flush=True)
