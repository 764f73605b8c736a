"""Draws the scalar curves of a `train --log-dir DIR` run as TensorBoard reads them.

The values come from TensorBoard's own reader (`EventAccumulator`, which also drops what a
killed process logged after the checkpoint a run resumed from), not from `metrics.jsonl`, so the
picture shows what `tensorboard --logdir DIR` draws. Needs `tensorboard` and `matplotlib`
(PyPI).

    python3 xtask/peers/plot_tensorboard.py LOG_DIR OUT.svg [TAG ...]
"""

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    log_dir, out = sys.argv[1], sys.argv[2]
    ea = EventAccumulator(log_dir, size_guidance={"scalars": 0})
    ea.Reload()
    tags = sys.argv[3:] or sorted(ea.Tags()["scalars"])
    fig, axes = plt.subplots(1, len(tags), figsize=(3.6 * len(tags), 3.0), squeeze=False)
    for ax, tag in zip(axes[0], tags):
        points = ea.Scalars(tag)
        ax.plot([p.step for p in points], [p.value for p in points], marker=".", linewidth=1)
        ax.set_title(tag, fontsize=10)
        ax.set_xlabel("step", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})
    print(f"wrote {out}: {', '.join(tags)}")


if __name__ == "__main__":
    main()
