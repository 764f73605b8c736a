"""GPT training parity: Tessera and PyTorch, from the same initial weights (one safetensors file)
and the same batches, must give the same training loss at every step.

Runs Tessera's side (`cargo run --release -p tessera-cli --example gpt_parity`), which writes
init.safetensors, batches.safetensors and tessera.json (its losses) into the output folder,
then trains the PyTorch twin (gpt_model.py) the same way: AdamW with decay on matrices only,
betas (0.9, 0.99), warm-up then cosine, gradient clipping at 1, no dropout. Prints both losses
per step and exits non-zero when the relative difference exceeds the tolerance of the dtype
(f64: 1e-9, f32: 1e-4).

    python3 xtask/peers/gpt_parity.py [--steps 20] [--dtype f64,f32] [--out target/gpt-parity]
"""

import argparse
import json
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_model import GPT, parameter_groups, warmup_cosine  # noqa: E402

TOLERANCE = {"f64": 1e-9, "f32": 1e-4}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tessera_side(out, dtype, steps, skip_build):
    if not skip_build:
        subprocess.run(
            ["cargo", "run", "--release", "--quiet", "-p", "tessera-cli", "--example",
             "gpt_parity", "--", out, dtype, str(steps)],
            cwd=ROOT, check=True)
    with open(os.path.join(out, "tessera.json")) as f:
        return json.load(f)


def torch_side(out, report):
    dtype = torch.float64 if report["dtype"] == "f64" else torch.float32
    model = GPT(report["config"]).to(dtype)
    model.load_state_dict(load_file(os.path.join(out, "init.safetensors")), strict=True)
    batches = load_file(os.path.join(out, "batches.safetensors"))
    opt = torch.optim.AdamW(parameter_groups(model, report["weight_decay"]), lr=report["lr"],
                            betas=tuple(report["betas"]), eps=report["eps"])
    steps = len(report["losses"])
    losses, norms = [], []
    model.train()
    for step in range(steps):
        lr = warmup_cosine(step, report["lr"], report["min_lr"], report["warmup"], steps)
        if abs(lr - report["lrs"][step]) > 1e-12 * report["lr"]:
            raise SystemExit(f"schedules differ at step {step}: {lr} vs {report['lrs'][step]}")
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        loss = model.loss(batches[f"x.{step}"], batches[f"y.{step}"])
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), report["clip"])))
        opt.step()
        losses.append(loss.item())
    return losses, norms


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--dtype", default="f64,f32")
    parser.add_argument("--out", default=os.path.join(ROOT, "target", "gpt-parity"))
    parser.add_argument("--skip-build", action="store_true",
                        help="reuse the Tessera outputs already in --out")
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    failed = False
    for dtype in [d.strip() for d in args.dtype.split(",") if d.strip()]:
        out = os.path.join(args.out, dtype)
        report = tessera_side(out, dtype, args.steps, args.skip_build)
        ours = report["losses"]
        theirs, norms = torch_side(out, report)
        tol = TOLERANCE[dtype]
        print(f"\n{dtype}: {len(ours)} steps, tolerance {tol:g} (relative)")
        print(f"{'step':>4} {'tessera loss':>22} {'pytorch loss':>22} {'rel. diff':>10} {'grad norm rel.':>14}")
        worst = 0.0
        for i, (a, b) in enumerate(zip(ours, theirs)):
            rel = abs(a - b) / max(abs(b), 1e-300)
            norm_rel = abs(report["grad_norms"][i] - norms[i]) / max(abs(norms[i]), 1e-300)
            worst = max(worst, rel)
            print(f"{i:>4} {a:>22.15f} {b:>22.15f} {rel:>10.2e} {norm_rel:>14.2e}")
        ok = worst <= tol
        failed |= not ok
        print(f"{dtype}: largest relative difference {worst:.3e}: {'PASS' if ok else 'FAIL'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
