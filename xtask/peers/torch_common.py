"""The PyTorch side of Tessera's model suites: the same two reference models as
`tessera_nn::models` (784-512-512-10 MLP; conv 3x3 32 -> pool -> conv 3x3 64 -> pool -> 3136-128-10),
random batches, and a description of the build for the peer_info line."""

import torch
from torch import nn


def build(model):
    """The reference model `model` ("mlp" or "cnn") in float32 on the CPU."""
    torch.manual_seed(0)
    if model == "mlp":
        return nn.Sequential(
            nn.Linear(784, 512), nn.ReLU(),
            nn.Linear(512, 512), nn.ReLU(),
            nn.Linear(512, 10),
        )
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
        nn.Linear(128, 10),
    )


def random_batch(model, batch):
    """A standard-normal input batch and random labels in 0..10."""
    g = torch.Generator().manual_seed(7)
    dims = (batch, 784) if model == "mlp" else (batch, 1, 28, 28)
    x = torch.randn(dims, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    return x, y


def describe():
    """PyTorch's version, threads and CPU math libraries."""
    return {
        "framework": "torch",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "mkl": torch.backends.mkl.is_available(),
        "mkldnn": torch.backends.mkldnn.is_available(),
    }
