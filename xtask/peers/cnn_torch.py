#!/usr/bin/env python3
"""PyTorch peer of Tessera's `cnn` suite: one training step of the `train` CNN.

Usage: python3 cnn_torch.py [--batch 64] [--reps N]
"""

import sys

import train_torch

if __name__ == "__main__":
    sys.exit(train_torch.main("cnn", __doc__))
