"""Plots a training run's loss curve (loss.csv from train.py) as a PNG.

Usage: python training/plot_loss.py --csv loss.csv --out loss.png
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args()
    rows = list(csv.DictReader(a.csv.open()))
    tokens = [float(r["tokens"]) / 1e6 for r in rows]
    loss = [float(r["loss"]) for r in rows]
    k = 100  # moving average over k steps (a batch holds one banking77 question or a dozen short ones)
    smooth = [sum(loss[max(0, i - k + 1) : i + 1]) / len(loss[max(0, i - k + 1) : i + 1]) for i in range(len(loss))]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.plot(tokens, loss, color="#bbb", linewidth=0.5, label="per step")
    ax.plot(tokens, smooth, color="#1f5fa8", linewidth=1.8, label=f"mean of {k} steps")
    ax.set_ylim(0, max(smooth) * 1.6)
    ax.set_xlabel("training tokens seen (millions)")
    ax.set_ylabel("loss (nats: label cross-entropy + score EMD²)")
    ax.set_title("Decision-tuning loss")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.out)
    print(f"plot_loss: wrote {a.out}")


if __name__ == "__main__":
    main()
