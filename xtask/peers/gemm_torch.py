#!/usr/bin/env python3
"""PyTorch peer of Tessera's `gemm` suite (run by `cargo xtask bench gemm`): `a @ b` of square
n x n float32 CPU tensors; prints a peer_info line, then one record per size.

Usage: python3 gemm_torch.py [--sizes 256,512,1024,2048,4096] [--reps N]
"""

import argparse
import sys

import torch

import peer_protocol as p
from torch_common import describe


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=p.int_list, default=[256, 512, 1024, 2048, 4096])
    parser.add_argument("--reps", type=p.positive_int, default=None)
    args = parser.parse_args()
    p.info(describe())
    g = torch.Generator().manual_seed(0)
    for n in args.sizes:
        a = torch.randn((n, n), generator=g)
        b = torch.randn((n, n), generator=g)
        samples = p.measure(lambda: a @ b, args.reps)
        p.emit("gemm", "torch", n, samples, flops=2.0 * n**3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
