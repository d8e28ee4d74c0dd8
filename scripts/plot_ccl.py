#!/usr/bin/env python3
"""Plots ccl_bench JSON output: busbw and latency against size, one line per algorithm and mode,
one PNG per collective (every collective the JSON holds: all_reduce, reduce_scatter, reduce,
all_gather, all_to_all, all_to_allv, broadcast, gather, scatter, send_recv).

With the ranks sharing one GPU (rows with hbm_GBps) the cudaMemcpy D2D ceiling, when its JSON
sits next to the main file, goes on a second axis. With the ranks on separate GPUs there is no
such ceiling: NCCL's rows (algorithm "nccl") are drawn as their own black lines, and a
horizontal line marks the NVLink ceiling per direction (--link-GBps, 450 for NVLink 4 on an
H100/H200 board) on the busbw axis, which nccl-tests' busbw is meant to be read against.
all_to_allv's page also shows all_to_all's graph-mode lines and its NCCL baseline (the bench
compares all_to_allv with NCCL's all_to_all). Rows whose check found wrong elements are marked
with a red x.

    python3 scripts/plot_ccl.py ccl_n8.json [--out-dir plots/] [--link-GBps 450]
"""
import argparse
import json
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The collective whose lines a collective's page shows too (the bench's nccl_twin).
TWIN = {"all_to_allv": "all_to_all"}


def draw(bw, lat, label, mode, rows, nccl=False, twin=False):
    rows = sorted(rows, key=lambda r: r["size"])
    sizes = [r["size"] for r in rows]
    kwargs = {"marker": ".", "linestyle": "-" if mode == "graph" else "--"}
    if nccl:
        kwargs.update(color="black", linewidth=2.2 if mode == "graph" else 1.4, zorder=5)
    elif twin:
        kwargs.update(linestyle=":", linewidth=1.2, alpha=0.8)
    bw.plot(sizes, [r["busbw_GBps"] for r in rows], label=label, **kwargs)
    lat.plot(sizes, [r["time_us"] for r in rows], label=label, **kwargs)
    bad = [r for r in rows if r.get("wrong", 0) > 0]
    if bad:
        bw.plot([r["size"] for r in bad], [r["busbw_GBps"] for r in bad], "x", color="red",
                markersize=9, zorder=6, label=f"{label}: wrong elements" if mode == "graph" else None)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", help="ccl_bench --json output")
    parser.add_argument("--out-dir", default=None, help="where the PNGs go (default: beside the JSON)")
    parser.add_argument("--link-GBps", type=float, default=450.0,
                        help="NVLink ceiling per direction per GPU, drawn when the ranks are on separate GPUs "
                             "(default 450: NVLink 4, H100/H200)")
    args = parser.parse_args()
    with open(args.json) as f:
        doc = json.load(f)
    out_dir = args.out_dir or os.path.dirname(os.path.abspath(args.json))
    os.makedirs(out_dir, exist_ok=True)
    # The bench adds hbm_GBps (and times cudaMemcpy as the ceiling) only when all ranks share one GPU.
    one_gpu = any("hbm_GBps" in r for r in doc["rows"])
    ceiling = None
    memcpy_path = args.json + ".memcpy.json"
    if one_gpu and os.path.exists(memcpy_path):
        with open(memcpy_path) as f:
            ceiling = [(r["size"], r["memcpy_d2d_GBps"]) for r in json.load(f)["rows"]]

    series = defaultdict(lambda: defaultdict(list))
    for row in doc["rows"]:
        series[row["collective"]][(row["algorithm"], row["mode"])].append(row)
    stem = os.path.splitext(os.path.basename(args.json))[0]
    title_tail = f'{doc.get("device", "")}, {doc.get("date", "")}, {doc.get("commit", "")[:10]}'
    for collective, lines in list(series.items()):
        fig, (bw, lat) = plt.subplots(1, 2, figsize=(13, 5))
        # iris::ccl's lines first, NCCL's last (on top).
        for (algorithm, mode), rows in sorted(lines.items(), key=lambda kv: (kv[0][0] == "nccl", kv[0])):
            draw(bw, lat, f"{algorithm} ({mode})", mode, rows, nccl=algorithm == "nccl")
        twin = TWIN.get(collective)
        if twin in series:
            for (algorithm, mode), rows in sorted(series[twin].items()):
                if algorithm == "nccl":
                    draw(bw, lat, f"nccl {twin} ({mode})", mode, rows, nccl=True)
                elif mode == "graph":
                    draw(bw, lat, f"{twin} {algorithm} ({mode})", mode, rows, twin=True)
        if ceiling:
            bw2 = bw.twinx()
            bw2.plot([s for s, _ in ceiling], [g for _, g in ceiling], ":", color="gray", label="cudaMemcpy D2D (read+write)")
            bw2.set_ylabel("cudaMemcpy GB/s (HBM ceiling)")
            bw2.legend(loc="lower right", fontsize=8)
        elif not one_gpu:
            bw.axhline(args.link_GBps, color="tab:red", linestyle="-.", linewidth=1.2,
                       label=f"NVLink {args.link_GBps:g} GB/s per direction (--link-GBps)")
        for ax in (bw, lat):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("size (bytes)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
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
