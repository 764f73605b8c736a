#!/usr/bin/env python3
"""PyTorch + transformers peer of Tessera's `decode` suite: each model folder Tessera's side
wrote under --dir (GPT-2 124M and the Llama shape, random weights) loaded with
`AutoModelForCausalLM.from_pretrained` in float32, at batch 1: the prefill of the same prompt,
greedy decoding of --new tokens with a DynamicCache rewound to the prompt (`crop`) before each
repetition, each argmax read on the host, and the resident memory of one prefill + decode.
With `--precision bf16` the folders load with `dtype=torch.bfloat16` (weights and compute in
bf16, as Tessera's side loads them).

Usage: python3 decode_torch.py [--shapes gpt2,llama] [--prefill 128] [--new 128] [--layers 12]
       [--width 768] [--heads 12] [--vocab N] [--reps N] [--dir target/bench/decode]
       [--precision f32|bf16]
"""

import argparse
import os
import sys
import time

import torch
from transformers import AutoModelForCausalLM, DynamicCache

import peer_protocol as p
from torch_common import describe

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="gpt2,llama")
    parser.add_argument("--prefill", type=p.positive_int, default=128)
    parser.add_argument("--new", type=p.positive_int, default=128)
    # The shape options only matter to Tessera's side, which writes the folders.
    parser.add_argument("--layers", type=p.positive_int, default=12)
    parser.add_argument("--width", type=p.positive_int, default=768)
    parser.add_argument("--heads", type=p.positive_int, default=12)
    parser.add_argument("--vocab", type=p.positive_int, default=None)
    parser.add_argument("--reps", type=p.positive_int, default=None)
    parser.add_argument("--dir", default="target/bench/decode")
    parser.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    a = parser.parse_args()
    p.info(describe())
    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    label = "bf16" if a.precision == "bf16" else None
    base = a.dir if os.path.isabs(a.dir) else os.path.join(ROOT, a.dir)
    for shape in [s for s in a.shapes.split(",") if s]:
        folder = os.path.join(base, shape)
        if not os.path.isfile(os.path.join(folder, "config.json")):
            sys.exit(f"{folder} is missing: Tessera's side writes it (cargo xtask bench decode)")
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
        model.eval()
        vocab = model.config.vocab_size
        # As DecodeArgs::prompt in xtask/src/bench/suites/decode.rs.
        prompt = torch.tensor([[(i * 7919 + 13) % vocab for i in range(a.prefill)]])

        def prefill():
            with torch.inference_mode():
                out = model(prompt, past_key_values=DynamicCache(config=model.config),
                            use_cache=True)
                return int(out.logits[0, -1].argmax())

        samples = p.measure(prefill, a.reps)
        p.emit("decode", "torch", a.prefill, samples, samples_counted=True, model=shape,
               phase="prefill", precision=label)

        with torch.inference_mode():
            cache = DynamicCache(config=model.config)
            first = int(model(prompt, past_key_values=cache, use_cache=True).logits[0, -1].argmax())

        def decode(cache):
            with torch.inference_mode():
                # transformers 5 crops by a negative count of positions to drop.
                extra = cache.get_seq_length() - a.prefill
                if extra > 0:
                    cache.crop(-extra)
                token = first
                for _ in range(a.new):
                    out = model(torch.tensor([[token]]), past_key_values=cache, use_cache=True)
                    token = int(out.logits[0, -1].argmax())
                return token

        samples = p.measure(lambda: decode(cache), a.reps)
        p.emit("decode", "torch", a.new, samples, samples_counted=True, model=shape,
               phase="decode", precision=label)

        del cache
        before, _ = resident()
        reset_peak()
        start = time.perf_counter()
        with torch.inference_mode():
            fresh = DynamicCache(config=model.config)
            model(prompt, past_key_values=fresh, use_cache=True)
        decode(fresh)
        seconds = time.perf_counter() - start
        after, peak = resident()
        del fresh
        p.emit("decode", "torch", a.prefill + a.new, [seconds], samples_counted=True, model=shape,
               phase="decode-memory", precision=label,
               memory={"rss_before_bytes": before, "peak_rss_bytes": peak,
                       "rss_after_bytes": after})
        del model
    return 0


if __name__ == "__main__":
    sys.exit(main())
