#!/usr/bin/env python3
"""PyTorch peer of Tessera's `gpt` suite: the same GPT (gpt_model.py) with the same initial
weights (the safetensors file Tessera's side writes), one training step (forward,
cross-entropy, backward, clip_grad_norm_, AdamW with decay on matrices only) on a fixed random
batch, and greedy generation at batch 1 with a key/value cache from a one-token prompt until
the context is full.

With `--precision bf16` the training step's forward and loss, and generation, run under
`torch.autocast(device_type="cpu", dtype=torch.bfloat16)` (PyTorch's CPU mixed precision: f32
master weights, bf16 products), the peer of Tessera's bf16 policy
(`cargo xtask bench gpt --precision bf16`).

With `--device cuda` everything runs on the GPU (autocast on CUDA under `--precision bf16`), and
every timed call ends with `torch.cuda.synchronize()`, as Tessera's side synchronises its
device: the peer of `tessera-bench --backend cuda gpt` (the gpu-check bundle runs the pair).

Usage: python3 gpt_torch.py [--batch 16] [--block 128] [--layers 4] [--heads 4] [--width 256]
       [--vocab 128] [--reps N] [--init target/bench/gpt-init.safetensors] [--precision f32]
       [--device cpu]
"""

import contextlib

import argparse
import os
import sys

import torch
from safetensors.torch import load_file

import peer_protocol as p
from gpt_model import GPT, parameter_groups
from torch_common import describe

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def forward_macs_per_token(a):
    """As GptArgs::forward_macs_per_token in xtask/src/bench/suites/gpt.rs."""
    return a.layers * (12.0 * a.width * a.width + a.block * a.width) + a.width * a.vocab


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=p.positive_int, default=16)
    parser.add_argument("--block", type=p.positive_int, default=128)
    parser.add_argument("--layers", type=p.positive_int, default=4)
    parser.add_argument("--heads", type=p.positive_int, default=4)
    parser.add_argument("--width", type=p.positive_int, default=256)
    parser.add_argument("--vocab", type=p.positive_int, default=128)
    parser.add_argument("--reps", type=p.positive_int, default=None)
    parser.add_argument("--init", default="target/bench/gpt-init.safetensors")
    parser.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a = parser.parse_args()
    device = torch.device(a.device)
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: PyTorch sees no CUDA device")
    p.info(describe())
    init = a.init if os.path.isabs(a.init) else os.path.join(ROOT, a.init)
    if not os.path.isfile(init):
        sys.exit(f"{init} is missing: Tessera's side writes it (cargo xtask bench gpt)")
    config = dict(n_layer=a.layers, n_head=a.heads, n_embd=a.width, block_size=a.block,
                  vocab_size=a.vocab, dropout=0.0, bias=True)
    model = GPT(config)
    model.load_state_dict(load_file(init), strict=True)
    model.to(device)

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    g = torch.Generator().manual_seed(7)
    batch = torch.randint(0, a.vocab, (a.batch, a.block + 1), generator=g)
    x, y = batch[:, :-1].contiguous().to(device), batch[:, 1:].contiguous().to(device)
    opt = torch.optim.AdamW(parameter_groups(model, 0.1), lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    model.train()

    def autocast():
        if a.precision == "bf16":
            return torch.autocast(device_type=a.device, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step():
        opt.zero_grad()
        with autocast():
            loss = model.loss(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync()
        return loss.detach()

    tokens = a.batch * a.block
    macs = forward_macs_per_token(a)
    samples = p.measure(step, a.reps)
    p.emit("gpt", "torch", tokens, samples, flops=6.0 * macs * tokens, samples_counted=True,
           model="gpt", phase="train", precision="bf16" if a.precision == "bf16" else None,
           backend=a.device)

    model.eval()
    new_tokens = max(a.block - 1, 1)

    def generate():
        with torch.inference_mode(), autocast():
            cache = model.new_cache(1, torch.bfloat16 if a.precision == "bf16" else torch.float32)
            logits = model(torch.zeros((1, 1), dtype=torch.long, device=device), cache)
            out = []
            for i in range(new_tokens):
                nxt = int(logits[0, -1].argmax())
                out.append(nxt)
                if i + 1 == new_tokens:
                    break
                logits = model(torch.tensor([[nxt]], dtype=torch.long, device=device), cache)
            return out

    samples = p.measure(generate, a.reps)
    p.emit("gpt", "torch", new_tokens, samples, flops=2.0 * macs * new_tokens,
           samples_counted=True, model="gpt", phase="generate",
           precision="bf16" if a.precision == "bf16" else None, backend=a.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
