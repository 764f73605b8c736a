"""The training-step measurement shared by mlp_torch.py and cnn_torch.py: forward,
cross-entropy, backward and an Adam step (PyTorch's defaults), on one fixed random batch."""

import argparse

import torch
import torch.nn.functional as F

import peer_protocol as p
from torch_common import build, describe, random_batch

DEFAULT_BATCH = {"mlp": 128, "cnn": 64}


def main(model, doc):
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--batch", type=p.positive_int, default=DEFAULT_BATCH[model])
    parser.add_argument("--reps", type=p.positive_int, default=None)
    args = parser.parse_args()
    p.info(describe())
    net = build(model)
    net.train()
    optimizer = torch.optim.Adam(net.parameters())
    x, y = random_batch(model, args.batch)

    def step():
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    samples = p.measure(step, args.reps)
    p.emit(model, "torch", args.batch, samples, flops=p.train_flops(model) * args.batch,
           samples_counted=True, model=model, phase="train")
    return 0
