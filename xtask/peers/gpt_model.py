"""The PyTorch twin of tessera_nn::gpt::Gpt, shared by the GPT benchmark peer (gpt_torch.py) and
the training parity check (gpt_parity.py): nanoGPT's architecture with the attention parameters
laid out like torch.nn.MultiheadAttention (in_proj_weight [3E, E], in_proj_bias, out_proj), so
that a Tessera checkpoint loads with load_state_dict(strict=True). Attention goes through
F.scaled_dot_product_attention (PyTorch's fused CPU kernel); generation keeps a key/value cache.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        self.n_head = n_head
        self.dropout = dropout
        self.in_proj_weight = nn.Parameter(torch.empty(3 * n_embd, n_embd))
        if bias:
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * n_embd))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(n_embd, n_embd, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, x, cache=None):
        b, t, e = x.shape
        q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).split(e, dim=2)
        heads = lambda z: z.view(b, t, self.n_head, e // self.n_head).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        start = 0
        if cache is not None:
            start = cache["len"]
            cache["k"][:, :, start:start + t] = k
            cache["v"][:, :, start:start + t] = v
            cache["len"] = start + t
            k, v = cache["k"][:, :, :start + t], cache["v"][:, :, :start + t]
        if start > 0 and t > 1:
            raise ValueError("several new positions after a non-empty cache are not supported")
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=(t > 1), dropout_p=self.dropout if self.training else 0.0)
        return self.out_proj(y.transpose(1, 2).contiguous().view(b, t, e))


class MLP(nn.Module):
    def __init__(self, n_embd, dropout, bias):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, bias=bias)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout, bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.ln_2 = nn.LayerNorm(n_embd, bias=bias)
        self.mlp = MLP(n_embd, dropout, bias)

    def forward(self, x, cache=None):
        x = x + self.attn_dropout(self.attn(self.ln_1(x), cache))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Config keys: n_layer, n_head, n_embd, block_size, vocab_size, dropout, bias."""

    def __init__(self, c):
        super().__init__()
        self.config = c
        e = c["n_embd"]
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], e),
            wpe=nn.Embedding(c["block_size"], e),
            drop=nn.Dropout(c.get("dropout", 0.0)),
            h=nn.ModuleList([Block(e, c["n_head"], c.get("dropout", 0.0), c.get("bias", True))
                             for _ in range(c["n_layer"])]),
            ln_f=nn.LayerNorm(e, bias=c.get("bias", True)),
        ))
        self.lm_head = nn.Linear(e, c["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx, cache=None):
        start = 0 if cache is None else cache[0]["len"]
        t = idx.shape[1]
        pos = torch.arange(start, start + t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for i, block in enumerate(self.transformer.h):
            x = block(x, None if cache is None else cache[i])
        return self.lm_head(self.transformer.ln_f(x))

    def loss(self, idx, targets):
        logits = self(idx)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def new_cache(self, batch, dtype):
        c = self.config
        shape = (batch, c["n_head"], c["block_size"], c["n_embd"] // c["n_head"])
        device = self.lm_head.weight.device
        return [dict(k=torch.zeros(shape, dtype=dtype, device=device),
                     v=torch.zeros(shape, dtype=dtype, device=device), len=0)
                for _ in range(c["n_layer"])]


def parameter_groups(model, weight_decay):
    """nanoGPT's AdamW groups: decay on parameters of rank >= 2, none on the others (each
    tied parameter once, as named_parameters lists it)."""
    params = [p for _, p in model.named_parameters()]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def warmup_cosine(step, lr, min_lr, warmup, steps):
    """The schedule of `train --model gpt`: (step + 1) / (warmup + 1) of lr during the
    warm-up, then a cosine from lr to min_lr over the remaining steps."""
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    t_max = max(steps - warmup, 1)
    return min_lr + (lr - min_lr) * (1 + math.cos(math.pi * (step - warmup) / t_max)) / 2
