#!/usr/bin/env python3
"""Draws the per-tile timeline of an iris::ops trace (Chrome trace-event JSON) as a PNG.

    python3 scripts/plot_trace.py trace.json trace.png [--title "GEMM + all-scatter, 4 ranks"]

One band per rank, one row per SM inside it; boxes are the events (gemm_tile, store, push,
wait; signals are ticks). Needs matplotlib.
"""
import argparse
import json
import sys

COLOURS = {"gemm_tile": "#4c72b0", "store": "#dd8452", "push": "#55a868", "wait": "#c44e52",
           "signal": "#000000"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("png")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    with open(args.trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    if not events:
        sys.exit(f"{args.trace}: no events")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = sorted({(e["pid"], e["tid"]) for e in events})
    row_of = {key: i for i, key in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(14, max(3.0, 0.05 * len(rows) + 2)))
    for kind, colour in COLOURS.items():
        mine = [e for e in events if e["name"] == kind]
        if not mine:
            continue
        if kind == "signal":
            ax.scatter([e["ts"] for e in mine], [row_of[(e["pid"], e["tid"])] + 0.5 for e in mine],
                       marker="|", s=12, color=colour, linewidths=0.5)
            continue
        for e in mine:
            ax.broken_barh([(e["ts"], max(e["dur"], 0.01))], (row_of[(e["pid"], e["tid"])], 0.9),
                           facecolors=colour, linewidth=0)
    ranks = sorted({pid for pid, _ in rows})
    ticks = [sum(1 for p, _ in rows if p < r) + sum(1 for p, _ in rows if p == r) / 2 for r in ranks]
    ax.set_yticks(ticks)
    ax.set_yticklabels([f"rank {r}" for r in ranks])
    for r in ranks[1:]:
        ax.axhline(sum(1 for p, _ in rows if p < r), color="grey", linewidth=0.5)
    ax.set_xlabel("microseconds")
    ax.set_ylabel("SMs, grouped by rank")
    ax.invert_yaxis()
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLOURS.items()
                       if any(e["name"] == k for e in events)], loc="upper right", fontsize=8)
    if args.title:
        ax.set_title(args.title)
    fig.tight_layout()
    fig.savefig(args.png, dpi=150)
    print(f"wrote {args.png}: {len(events)} events, {len(ranks)} ranks")


if __name__ == "__main__":
    main()
