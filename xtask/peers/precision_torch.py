#!/usr/bin/env python3
"""PyTorch peer of Tessera's `precision` suite (xtask/src/bench/suites/precision.rs): 16-bit
compute against float32 on the CPU, with torch.autocast(device_type="cpu", dtype=...) as
PyTorch's mixed precision, for a GEMM and a training step, in speed and in peak memory.

* gemm: `a @ b` of n x n tensors stored in the precision's dtype (float32, or bfloat16 /
  float16 rounded from the same standard-normal float32 values), under autocast for 16 bits
  (which leaves 16-bit inputs as they are).
* mlp, cnn: one training step (forward and cross-entropy under autocast, backward, Adam on the
  float32 parameters; torch.amp.GradScaler("cpu") under f16).
* memory (--part memory): VmRSS before the unit, its peak (VmHWM reset through
  /proc/self/clear_refs) during one product at the largest size / one training step, VmRSS
  after, as mem_torch.py measures.

Prints a peer_info line, then one record per case with its "precision".

Usage: python3 precision_torch.py [--workloads gemm,mlp,cnn] [--precisions f32,bf16]
                                  [--sizes 256,512,1024,2048] [--batch N] [--reps N]
                                  [--part all|speed|memory]
"""

import argparse
import contextlib
import sys
import time

import torch
import torch.nn.functional as F

import peer_protocol as p
from mem_torch import reset_peak, resident
from torch_common import build, describe, random_batch

DEFAULT_BATCH = {"mlp": 128, "cnn": 64}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def autocast(precision):
    """PyTorch's CPU mixed precision for a 16-bit `precision`; nothing for f32."""
    if precision == "f32":
        return contextlib.nullcontext()
    return torch.autocast(device_type="cpu", dtype=DTYPES[precision])


def gemm_operands(n, precision):
    g = torch.Generator().manual_seed(0)
    a = torch.randn((n, n), generator=g).to(DTYPES[precision])
    b = torch.randn((n, n), generator=g).to(DTYPES[precision])
    return a, b


def gemm_step(a, b, precision):
    def run():
        with autocast(precision):
            return a @ b
    return run


class TrainingSetup:
    """The model, Adam, a random batch and (under f16) a GradScaler, as the Tessera side."""

    def __init__(self, model, precision, batch):
        self.net = build(model)
        self.net.train()
        self.optimizer = torch.optim.Adam(self.net.parameters())
        self.x, self.y = random_batch(model, batch)
        self.precision = precision
        self.scaler = torch.amp.GradScaler("cpu") if precision == "f16" else None

    def step(self):
        self.optimizer.zero_grad()
        with autocast(self.precision):
            loss = F.cross_entropy(self.net(self.x), self.y)
        if self.scaler is None:
            loss.backward()
            self.optimizer.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return loss.detach()


def memory_of(unit):
    """Runs `unit` once between two readings of the resident set, its peak reset first;
    returns the seconds and the memory dict of a record."""
    before, _ = resident()
    reset_peak()
    start = time.perf_counter()
    out = unit()
    seconds = time.perf_counter() - start
    after, peak = resident()
    del out
    return seconds, {"rss_before_bytes": before, "peak_rss_bytes": peak,
                     "rss_after_bytes": after}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="gemm,mlp,cnn")
    parser.add_argument("--precisions", default="f32,bf16")
    parser.add_argument("--sizes", type=p.int_list, default=[256, 512, 1024, 2048])
    parser.add_argument("--batch", type=p.positive_int, default=None)
    parser.add_argument("--reps", type=p.positive_int, default=None)
    parser.add_argument("--part", choices=["all", "speed", "memory"], default="all")
    args = parser.parse_args()
    workloads = [w for w in args.workloads.split(",") if w]
    precisions = [q for q in args.precisions.split(",") if q]
    p.info(describe())
    if args.part != "memory":
        for workload in workloads:
            for precision in precisions:
                if workload == "gemm":
                    for n in args.sizes:
                        a, b = gemm_operands(n, precision)
                        samples = p.measure(gemm_step(a, b, precision), args.reps)
                        p.emit("precision", "torch", n, samples, flops=2.0 * n**3,
                               phase="gemm", precision=precision)
                else:
                    batch = args.batch or DEFAULT_BATCH[workload]
                    setup = TrainingSetup(workload, precision, batch)
                    samples = p.measure(setup.step, args.reps)
                    p.emit("precision", "torch", batch, samples,
                           flops=p.train_flops(workload) * batch, samples_counted=True,
                           model=workload, phase="train", precision=precision)
    if args.part != "speed":
        for workload in workloads:
            for precision in precisions:
                if workload == "gemm":
                    n = max(args.sizes)
                    a, b = gemm_operands(n, precision)
                    seconds, memory = memory_of(gemm_step(a, b, precision))
                    p.emit("precision", "torch", n, [seconds], phase="gemm-memory",
                           precision=precision, memory=memory)
                else:
                    batch = args.batch or DEFAULT_BATCH[workload]
                    setup = TrainingSetup(workload, precision, batch)
                    seconds, memory = memory_of(setup.step)
                    p.emit("precision", "torch", batch, [seconds], model=workload,
                           phase="train-memory", precision=precision, memory=memory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
