#!/usr/bin/env python3
"""PyTorch peer of Tessera's `gemm` suite (run by `cargo xtask bench gemm`): `a @ b` of square
n x n float32 or float64 CPU tensors (`.t()` views for the nt and tn layouts); prints a
peer_info line, then one record per case.

Usage: python3 gemm_torch.py [--sizes 256,512,1024,2048,4096] [--reps N] [--dtypes f32,f64]
                             [--layouts nn,nt,tn]
"""

import argparse
import sys

import torch

import peer_protocol as p
from torch_common import describe


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_gemm_args(parser)
    args = parser.parse_args()
    p.info(describe())
    g = torch.Generator().manual_seed(0)
    types = {"f32": torch.float32, "f64": torch.float64}
    for dtype, layout, n, variant in p.gemm_cases(args):
        a = torch.randn((n, n), generator=g, dtype=types[dtype])
        b = torch.randn((n, n), generator=g, dtype=types[dtype])
        if layout == "nt":
            b = b.t()
        elif layout == "tn":
            a = a.t()
        samples = p.measure(lambda: a @ b, args.reps)
        p.emit("gemm", "torch", n, samples, flops=2.0 * n**3, variant=variant)
    return 0


if __name__ == "__main__":
    sys.exit(main())
