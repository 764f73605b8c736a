#!/usr/bin/env python3
"""PyTorch peer of Tessera's `infer` suite: one forward pass in eval mode under
torch.inference_mode(), per model and batch size (1: latency, larger: throughput).

Usage: python3 infer_torch.py [--models mlp,cnn] [--batches 1,256] [--reps N]
"""

import argparse
import sys

import torch

import peer_protocol as p
from torch_common import build, describe, random_batch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=lambda s: s.split(","), default=["mlp", "cnn"])
    parser.add_argument("--batches", type=p.int_list, default=[1, 256])
    parser.add_argument("--reps", type=p.positive_int, default=None)
    args = parser.parse_args()
    p.info(describe())
    for model in args.models:
        net = build(model)
        net.eval()
        for batch in args.batches:
            x, _ = random_batch(model, batch)

            def forward():
                with torch.inference_mode():
                    return net(x)

            samples = p.measure(forward, args.reps)
            phase = "infer-1" if batch == 1 else "infer-batch"
            p.emit("infer", "torch", batch, samples, flops=p.forward_flops(model) * batch,
                   samples_counted=True, model=model, phase=phase)
    return 0


if __name__ == "__main__":
    sys.exit(main())
