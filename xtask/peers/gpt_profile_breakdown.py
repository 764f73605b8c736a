"""Attributes perf samples of a `tessera-bench gpt` run to the phases and op families of the
training step (reads `perf script` output with call graphs on stdin)."""
import sys, collections, re

FAMILIES = [
    ("attention", ("scaled_dot_product_attention", "kernels::attention")),
    ("layer norm", ("layer_norm", "LayerNorm")),
    ("GELU", ("gelu",)),
    ("cross-entropy", ("cross_entropy", "log_softmax", "nll_loss")),
    ("AdamW", ("adam",)),
    ("matmul (GEMM)", ("gemm", "matmul")),
    ("bias gradients (row sums)", ("sum_to_dims",)),
    ("allocation", ("malloc", "_int_free", "cfree", "memset", "alloc::alloc", "try_zeroed", "try_uninit", "page_fault", "clear_page")),
    ("copies", ("memmove", "memcpy", "contiguous_copy", "copy_strided", "assign_storage")),
]

def bare(frame):
    """The frame's function path without generic arguments (whose types, such as
    `alloc::vec::Vec<..>`, would otherwise match a family's keys)."""
    out, depth = [], 0
    for ch in frame:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)

def classify(frames):
    text = "\n".join(frames)
    if "generate" in text and "backward" not in text:
        return None, None
    if "gpt::measure" not in text:
        return None, None
    if "graph::<impl" in text and "backward" in text:
        phase = "backward"
    elif "clip_grad_norm" in text:
        phase = "gradient clipping"
    elif "optim" in text:
        phase = "optimizer"
    elif "zero_grad" in text:
        phase = "zero_grad"
    else:
        phase = "forward (incl. loss)"
    frames = [bare(f) for f in frames]
    # Fused ops own the GEMMs and maps they call: matched anywhere in the stack first.
    for name, keys in FAMILIES[:5]:
        if any(k in f for f in frames for k in keys):
            return phase, name
    # The GEMM kernel owns its packing (a `memcpy` of rows under `kernels::gemm`).
    if any("kernels::gemm" in f for f in frames):
        return phase, "matmul (GEMM)"
    for f in frames:  # then leaf first
        for name, keys in FAMILIES[5:]:
            if any(k in f for k in keys):
                return phase, name
    return phase, "other element-wise / reductions"

phases, families, total = collections.Counter(), collections.Counter(), 0
frames = []
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line.strip():
        if frames:
            p, fam = classify(frames)
            if p:
                phases[p] += 1; families[fam] += 1; total += 1
        frames = []
        continue
    if line.startswith("\t") or line.startswith(" "):
        frames.append(line.strip())
print(f"samples in training steps: {total}")
for title, c in (("phase", phases), ("op family", families)):
    print(f"| {title} | share |")
    print("| --- | --- |")
    for k, v in c.most_common():
        print(f"| {k} | {100*v/total:.1f}% |")
