#!/usr/bin/env python3
"""PyTorch peer of Tessera's `mlp` suite: one training step of the 784-512-512-10 MLP.

Usage: python3 mlp_torch.py [--batch 128] [--reps N]
"""

import sys

import train_torch

if __name__ == "__main__":
    sys.exit(train_torch.main("mlp", __doc__))
