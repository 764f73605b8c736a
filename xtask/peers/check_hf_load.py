"""Checks that `transformers` loads a model folder Tessera saved (`save_pretrained`) and computes
the logits Tessera computed: `python3 xtask/peers/check_hf_load.py DIR`, where DIR also holds
`tessera_logits.safetensors` with `input_ids` (int64 [batch, t]) and `logits` (float32
[batch, t, vocab]). Prints the relative error (max |diff| / max |logits|) and exits 1 above
1e-4. Run by nn's integration test `pretrained::saved_folders_load_in_transformers` when
`transformers` and `torch` import."""

import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def main():
    folder = sys.argv[1]
    ours = load_file(f"{folder}/tessera_logits.safetensors")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        logits = model(ours["input_ids"]).logits
    err = ((logits - ours["logits"]).abs().max() / ours["logits"].abs().max()).item()
    print(f"{type(model).__name__}: relative error {err:.3e}")
    sys.exit(0 if err < 1e-4 else 1)


if __name__ == "__main__":
    main()
