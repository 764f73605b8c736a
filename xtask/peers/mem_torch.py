#!/usr/bin/env python3
"""PyTorch peer of Tessera's `mem` suite (xtask/src/bench/suites/mem.rs): the resident memory
of one training step and of one epoch of the reference models, measured the same way.

In this fresh process, with the model, Adam and one random batch in place, the resident set is
read from /proc/self/status (VmRSS) and its peak (VmHWM) reset through /proc/self/clear_refs;
then one step (record `train-step`: the peak during it) and the rest of an epoch on the same
batch (record `train-epoch`: the peak over the whole epoch). Prints a peer_info line, the
records, and a `mem_epochs` line with the resident set at the end of each epoch.

Usage: python3 mem_torch.py [--models mlp,cnn] [--batch N] [--epoch-samples 60000]
                            [--epochs 1]
"""

import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

import peer_protocol as p
from torch_common import build, describe, random_batch

DEFAULT_BATCH = {"mlp": 128, "cnn": 64}


def resident():
    """(VmRSS, VmHWM) of this process in bytes."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def reset_peak():
    """VmHWM := VmRSS; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure(model, batch, epoch_samples, epochs, leak_bytes):
    steps = max(1, -(-epoch_samples // batch))
    net = build(model)
    net.train()
    optimizer = torch.optim.Adam(net.parameters())
    x, y = random_batch(model, batch)
    leaked = []

    def step():
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        optimizer.step()
        if leak_bytes:
            leaked.append(torch.zeros(leak_bytes // 4))

    before, _ = resident()
    peak_reset = reset_peak()
    start = time.perf_counter()
    step()
    step_s = time.perf_counter() - start
    after_step = resident()
    for _ in range(1, steps):
        step()
    epoch_s = time.perf_counter() - start
    after_epoch = resident()
    for phase, seconds, (after, peak) in (("train-step", step_s, after_step),
                                          ("train-epoch", epoch_s, after_epoch)):
        p.emit("mem", "torch", batch, [seconds], model=model, phase=phase,
               memory={"rss_before_bytes": before, "peak_rss_bytes": peak,
                       "rss_after_bytes": after})
    ends = [after_epoch[0]]
    for _ in range(1, epochs):
        for _ in range(steps):
            step()
        ends.append(resident()[0])
    print(json.dumps({"mem_epochs": {
        "framework": "torch", "model": model, "batch": batch, "steps_per_epoch": steps,
        "peak_reset": peak_reset, "rss_at_epoch_end_bytes": ends}}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--batch", type=p.positive_int, default=None)
    parser.add_argument("--epoch-samples", type=p.positive_int, default=60000)
    parser.add_argument("--epochs", type=p.positive_int, default=1)
    parser.add_argument("--leak-bytes-per-step", type=int, default=0)
    args = parser.parse_args()
    p.info(describe())
    for model in [m for m in args.models.split(",") if m]:
        batch = args.batch or DEFAULT_BATCH[model]
        measure(model, batch, args.epoch_samples, args.epochs, args.leak_bytes_per_step)
    return 0


if __name__ == "__main__":
    sys.exit(main())
