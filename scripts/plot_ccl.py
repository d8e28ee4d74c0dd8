#!/usr/bin/env python3
"""Plots ccl_bench JSON output: busbw and latency against size, one line per algorithm and mode
(and the cudaMemcpy D2D ceiling when its JSON sits next to the main file), one PNG per
collective.

    python3 scripts/plot_ccl.py ccl_n8.json [--out-dir plots/]
"""
import argparse
import json
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("json", help="ccl_bench --json output")
    parser.add_argument("--out-dir", default=None, help="where the PNGs go (default: beside the JSON)")
    args = parser.parse_args()
    with open(args.json) as f:
        doc = json.load(f)
    out_dir = args.out_dir or os.path.dirname(os.path.abspath(args.json))
    os.makedirs(out_dir, exist_ok=True)
    ceiling = None
    memcpy_path = args.json + ".memcpy.json"
    if os.path.exists(memcpy_path):
        with open(memcpy_path) as f:
            ceiling = [(r["size"], r["memcpy_d2d_GBps"]) for r in json.load(f)["rows"]]

    series = defaultdict(lambda: defaultdict(list))
    for row in doc["rows"]:
        series[row["collective"]][(row["algorithm"], row["mode"])].append(row)
    stem = os.path.splitext(os.path.basename(args.json))[0]
    title_tail = f'{doc.get("device", "")}, {doc.get("date", "")}, {doc.get("commit", "")[:10]}'
    for collective, lines in series.items():
        fig, (bw, lat) = plt.subplots(1, 2, figsize=(13, 5))
        for (algorithm, mode), rows in sorted(lines.items()):
            rows.sort(key=lambda r: r["size"])
            sizes = [r["size"] for r in rows]
            style = "-" if mode == "graph" else "--"
            bw.plot(sizes, [r["busbw_GBps"] for r in rows], style, marker=".", label=f"{algorithm} ({mode})")
            lat.plot(sizes, [r["time_us"] for r in rows], style, marker=".", label=f"{algorithm} ({mode})")
        if ceiling and any("hbm_GBps" in r for rows in lines.values() for r in rows):
            bw2 = bw.twinx()
            bw2.plot([s for s, _ in ceiling], [g for _, g in ceiling], ":", color="gray", label="cudaMemcpy D2D (read+write)")
            bw2.set_ylabel("cudaMemcpy GB/s (HBM ceiling)")
            bw2.legend(loc="lower right", fontsize=8)
        for ax in (bw, lat):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("size (bytes)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        bw.set_ylabel("busbw (GB/s)")
        lat.set_yscale("log")
        lat.set_ylabel("time per call (us)")
        fig.suptitle(f"iris::ccl {collective}: {doc.get('context', '')}\n{title_tail}", fontsize=9)
        fig.tight_layout()
        path = os.path.join(out_dir, f"{stem}_{collective}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print("wrote", path)


if __name__ == "__main__":
    main()
