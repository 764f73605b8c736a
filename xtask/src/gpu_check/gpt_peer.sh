#!/usr/bin/env bash
# Written by `cargo xtask gpu-check`: the GPT training step and greedy generation on CUDA, Tessera
# against PyTorch on the same GPU in the same run, alternating, from the same initial weights
# (`tessera-bench gpt` writes them, `peers/gpt_torch.py --device cuda` loads them). Two shapes:
# the bench's default GPT and a GPT-2-small-sized one (12 blocks, width 768), the latter in f32
# and bf16. Usage: gpt_peer.sh HERE OUT; records in OUT/gpt-peer.jsonl, a table on stdout.
set -uo pipefail
here=$1 out=$2
mkdir -p "$out"
if ! python3 -c "import torch, safetensors; assert torch.cuda.is_available()" 2>"$out/why.txt"; then
  echo "skipped: no PyTorch with CUDA here: $(tail -n 1 "$out/why.txt")"
  exit 0
fi
status=0
case_number=0
while read -r precision shape; do
  case_number=$((case_number + 1))
  init="$out/gpt-init-$case_number.safetensors"
  for pair in 1 2; do
    # shellcheck disable=SC2086 # the shape is several words on purpose
    "$here/bin/tessera-bench" --backend cuda gpt $shape --precision "$precision" --reps 5 \
      --init "$init" >>"$out/gpt-peer.jsonl" || status=1
    # shellcheck disable=SC2086
    python3 "$here/peers/gpt_torch.py" --device cuda --precision "$precision" $shape --reps 5 \
      --init "$init" >>"$out/gpt-peer.jsonl" || status=1
  done
done <<'CASES'
f32 --batch 16 --block 128 --layers 4 --heads 4 --width 256 --vocab 128
f32 --batch 8 --block 256 --layers 12 --heads 12 --width 768 --vocab 8192
bf16 --batch 8 --block 256 --layers 12 --heads 12 --width 768 --vocab 8192
CASES
python3 - "$out/gpt-peer.jsonl" <<'PY'
import json, sys, statistics
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("suite") != "gpt" or "median_s" not in r:
        continue
    key = (r.get("precision") or "f32", r.get("phase"), r.get("flops"))
    rows.setdefault(key, {}).setdefault(r["framework"], []).append(r["median_s"])
print("precision phase     GFLOP/unit  tessera_ms  torch_ms  tessera/torch speed")
for (precision, phase, flops), sides in rows.items():
    t, p = sides.get("tessera", []), sides.get("torch", [])
    if not t or not p:
        continue
    ratios = sorted(pt / tt for tt, pt in zip(t, p))
    print(f"{precision:9} {phase:9} {flops / 1e9:10.1f} {1e3 * statistics.median(t):11.2f}"
          f" {1e3 * statistics.median(p):9.2f}  {statistics.median(ratios):.2f}x"
          f" [{ratios[0]:.2f}, {ratios[-1]:.2f}]")
PY
exit "$status"
