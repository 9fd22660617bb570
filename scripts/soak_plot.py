#!/usr/bin/python3
"""Draws a soak's samples: the growth of heap in use (KiB) and of RSS (MiB) since each
process's first sample, against time, one line per process.

    scripts/soak_plot.py OUT.png CSV...

SOAK_PLOT_TITLE sets the title. Each CSV is what `soak --csv PREFIX` writes (PREFIX.rank<r>.csv; scripts/soak.sh names the
prefix after the configuration), so a line is labelled <configuration> rank <r>.
"""
import csv
import os
import re
import sys


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [{k: float(v) for k, v in r.items()} for r in rows]


def label(path):
    m = re.match(r"(.*)\.rank(\d+)\.csv$", os.path.basename(path))
    return f"{m.group(1)} rank {m.group(2)}" if m else os.path.basename(path)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out, paths = argv[1], sorted(argv[2:])
    title = os.environ.get("SOAK_PLOT_TITLE", "soak: resources at each checkpoint")
    fig, axes = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    for path in paths:
        rows = load(path)
        if not rows:
            continue
        minutes = [r["seconds"] / 60 for r in rows]
        heap0, rss0 = rows[0]["heap_kib"], rows[0]["rss_kib"]
        axes[0].plot(minutes, [r["heap_kib"] - heap0 for r in rows], label=label(path), linewidth=1)
        axes[1].plot(minutes, [(r["rss_kib"] - rss0) / 1024 for r in rows], label=label(path), linewidth=1)
    axes[0].set_ylabel("heap in use, KiB above the first sample")
    axes[1].set_ylabel("RSS after malloc_trim, MiB above the first")
    axes[1].set_xlabel("minutes since start (each configuration from its own start)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7, ncol=4)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
