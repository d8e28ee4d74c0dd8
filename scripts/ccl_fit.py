#!/usr/bin/env python3
"""Splits ccl_bench's large-message times into a fixed cost per call and a streaming rate.

For ranks sharing one GPU (rows with hbm_GBps): per collective and algorithm, graph mode, a
least-squares line through time_us against the HBM bytes the algorithm must move (hbm_GBps x
time) over the sizes from --from (default 64 MiB); the same for cudaMemcpy D2D from the
.memcpy.json beside the main file. It prints the fixed cost (the line at zero bytes), the
streaming rate against cudaMemcpy's, and the size from which the fit reaches --mark (0.90) of
cudaMemcpy, where it does.

A collective whose calls move few bytes per size (gather, scatter: size / n per rank, against
all_gather's size per rank) reaches the mark late even at the streaming rate of the others: its
fixed cost weighs n times more.

    python3 scripts/ccl_fit.py ccl_bench_n8.json [--from 64M] [--mark 0.9] [--csv out.csv]
"""
import argparse
import csv
import json
import sys


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B").rstrip("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def line(xs, ys):
    """Least squares y = a + b x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", help="ccl_bench --json output (its .memcpy.json beside it)")
    parser.add_argument("--from", dest="first", default="64M", help="the smallest size fitted (default 64M)")
    parser.add_argument("--mark", type=float, default=0.90, help="the fraction of cudaMemcpy to reach (0.90)")
    parser.add_argument("--csv", help="also write the table here")
    args = parser.parse_args()
    first = parse_bytes(args.first)
    with open(args.json) as f:
        rows = json.load(f)["rows"]
    try:
        with open(args.json + ".memcpy.json") as f:
            memcpy = {r["size"]: r["memcpy_d2d_GBps"] for r in json.load(f)["rows"]}
    except FileNotFoundError:
        sys.exit(f"ccl_fit: no {args.json}.memcpy.json beside it (ranks on separate GPUs have no memcpy ceiling)")
    sizes = sorted(s for s in memcpy if s >= first and memcpy[s] > 0)
    if len(sizes) < 2:  # a short sweep: nothing to fit, which is no error
        print(f"ccl_fit: {args.json}: fewer than two sizes from {first} bytes, nothing to fit")
        return
    # cudaMemcpy of s bytes moves 2 s HBM bytes (read and write).
    m_fixed, m_slope = line([2.0 * s for s in sizes], [2e-3 * s / memcpy[s] for s in sizes])

    cases = {}
    for r in rows:
        if r.get("mode") == "graph" and "hbm_GBps" in r and r["size"] in sizes and r.get("wrong", 0) == 0:
            cases.setdefault((r["collective"], r["algorithm"]), {})[r["size"]] = r
    out = []
    for (collective, algorithm), by_size in sorted(cases.items()):
        if len(by_size) < 2:
            continue
        pts = sorted(by_size.items())
        hbm = [r["hbm_GBps"] * r["time_us"] * 1e3 for _, r in pts]  # bytes per call
        fixed, slope = line(hbm, [r["time_us"] for _, r in pts])
        rate = m_slope / slope if slope > 0 else float("inf")
        # bytes per size (hbm / size) is the algorithm's own constant: the size where the fit of
        # memcpy time / fit of our time (same HBM bytes) reaches the mark, if it does.
        per_size = hbm[-1] / pts[-1][0]
        reach = None
        if rate > args.mark:
            # (m_fixed + m_slope B) / (fixed + slope B) >= mark  <=>  B >= (mark fixed - m_fixed) / (m_slope - mark slope)
            denominator = m_slope - args.mark * slope
            if denominator > 0:
                reach = max(0.0, (args.mark * fixed - m_fixed) / denominator) / per_size
        # The smallest size from which every measured size reaches the mark.
        measured_from = None
        for s, r in reversed(pts):
            if r.get("vs_memcpy", 0) < args.mark:
                break
            measured_from = s
        out.append({"collective": collective, "algorithm": algorithm, "fixed_us": fixed,
                    "streaming_vs_memcpy": rate, "hbm_bytes_per_size": per_size,
                    "fit_reaches_mark_at": reach,
                    "measured_from": measured_from})

    def size_text(b):
        if b is None:
            return "-"
        for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
            if b >= div:
                return f"{b / div:.0f}{unit}" if b / div >= 10 else f"{b / div:.1f}{unit}"
        return f"{b:.0f}"

    print(f"{args.json}: graph mode, sizes {size_text(sizes[0])}-{size_text(sizes[-1])}; "
          f"cudaMemcpy D2D: {m_fixed:.1f} us fixed, {1e-3 / m_slope:.0f} GB/s streaming")
    print(f"{'collective':>14} {'algorithm':>14} {'fixed_us':>9} {'streaming':>10} {'hbm/size':>9} "
          f"{'fit >= ' + format(args.mark, '.2f') + ' from':>17} {'measured from':>14}")
    for o in out:
        print(f"{o['collective']:>14} {o['algorithm']:>14} {o['fixed_us']:9.1f} {o['streaming_vs_memcpy']:10.3f} "
              f"{o['hbm_bytes_per_size']:9.2f} {size_text(o['fit_reaches_mark_at']):>17} "
              f"{size_text(o['measured_from']):>14}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out[0].keys()) if out else ["collective"])
            w.writeheader()
            w.writerows(out)


if __name__ == "__main__":
    main()
