#!/usr/bin/env python3
"""Appends one record's row to benchmarks/results/INDEX.md (the index of every results record).

    scripts/results-index.py RECORD_DIR --what "tests, benchmarks, sanitizers" [--index INDEX.md]

RECORD_DIR is <root>/<machine>/<date>-<commit>/ as scripts/gpu-check.sh writes it. The headline
figures come from the record's own files: tests.log (ctest's summary) and the benchmarks' JSON
(loose *.json, or json.tar as the check script writes it). A figure whose file is missing is left
out. The index defaults to INDEX.md two levels above RECORD_DIR.
"""
import argparse
import io
import json
import pathlib
import re
import sys
import tarfile


def load_json_files(record):
    files = {}
    for path in sorted(record.glob("*.json")):
        try:
            files[path.name] = json.loads(path.read_text())
        except (OSError, ValueError):
            pass
    # json.tar, and json-<phases>.tar of records that several calls of scripts/gpu-check.sh
    # (IRIS_GPU_CHECK_ONLY) made together
    for tar in sorted(record.glob("json*.tar")):
        with tarfile.open(tar) as archive:
            for member in archive.getmembers():
                name = pathlib.PurePath(member.name).name
                if member.isfile() and name.endswith(".json") and name not in files:
                    try:
                        files[name] = json.load(io.TextIOWrapper(archive.extractfile(member)))
                    except ValueError:
                        pass
    return files


def tests_headline(record):
    """"tests P/T" over tests.log and tests-trap.log (the tests that trap on purpose, run last)."""
    passed = total = 0
    for name in ("tests.log", "tests-trap.log"):
        log = record / name
        if not log.exists():
            continue
        text = log.read_text(errors="replace")
        match = re.search(r"(\d+)% tests passed(?:, (\d+) tests? failed)? out of (\d+)", text)
        if match:
            total += int(match.group(3))
            passed += int(match.group(3)) - int(match.group(2) or 0)
    return f"tests {passed}/{total}" if total else None


def rma_headline(files):
    data = files.get("rma_bandwidth_n2.json")
    if not data:
        return None
    ratios = [(row["ratio"], row["op"], row["bytes"]) for row in data.get("rows", [])
              if row.get("coop") == "block" and row.get("op") in ("put", "get", "copy")
              and row.get("bytes", 0) >= 64 << 20 and "ratio" in row]
    if not ratios:
        return None
    lowest = min(ratios)
    # The reference: cudaMemcpy D2D on one GPU, cudaMemcpyPeer between GPUs (the row says).
    reference = next((row["ratio_to"] for row in data.get("rows", []) if "ratio_to" in row),
                     "cudaMemcpy")
    text = (f"block put/get/copy >= 64 MiB >= {lowest[0]:.3f} of {reference} "
            f"(lowest: {lowest[1]} at {int(lowest[2]) >> 20} MiB)")
    links = [row["of_450"] for row in data.get("rows", [])
             if row.get("coop") == "block" and row.get("op") in ("put", "get", "copy")
             and row.get("bytes", 0) >= 64 << 20 and "of_450" in row]
    return text + (f", >= {min(links):.2f} of 450 GB/s" if links else "")


def signal_headline(files):
    data = files.get("signal_latency_n2.json")
    if not data:
        return None
    for row in data.get("rows", []):
        if str(row.get("round trip", "")).startswith("signal_set"):
            return f"signal_set round trip {row['us_median']:.2f} us ({row['vs_raw']:.2f} of raw)"
    return None


def barrier_headline(files):
    parts = []
    for n in (2, 4, 8):
        data = files.get(f"barrier_latency_n{n}.json")
        if not data:
            continue
        for row in data.get("rows", []):
            if str(row.get("barrier", "")).startswith("barrier(block)"):
                parts.append(f"{row['us_median']:.2f}")
                break
        else:
            continue
        parts[-1] += f" (n{n})"
    return "block barrier " + " / ".join(parts) + " us" if parts else None


def peer_headline(files):
    data = files.get("peer_bandwidth_n2.json")
    if not data:
        return None
    pairs = [row["GBps"] for row in data.get("rows", []) if row.get("pattern") == "pair"]
    if not pairs:
        return None
    text = f"peer pairs {min(pairs):.0f}-{max(pairs):.0f} GB/s (n2)"
    both = [row["GBps_per_direction"] for row in data.get("rows", [])
            if row.get("pattern") == "pair both ways" and "GBps_per_direction" in row]
    if both:
        text += f", both ways {min(both):.0f} GB/s per direction"
    links = [row["of_450"] for row in data.get("rows", [])
             if row.get("pattern") == "pair" and "of_450" in row]
    return text + (f" ({min(links):.2f}-{max(links):.2f} of 450 GB/s)" if links else "")


def ccl_headline(files):
    """The fastest iris::ccl algorithm (graph) against NCCL at >= 64 MiB, per team size, where
    NCCL ran (one GPU per rank); else its HBM bandwidth against cudaMemcpy D2D (ranks sharing a
    GPU: no NCCL)."""
    parts = []
    for n in (2, 4, 8):
        nccl = files.get(f"ccl_bench_n{n}.json.nccl.json")
        if nccl:
            ratios = [row["iris_over_nccl"] for row in nccl.get("rows", [])
                      if row.get("size", 0) >= 64 << 20 and "iris_over_nccl" in row]
            if ratios:
                parts.append(("NCCL", f"{min(ratios):.2f}-{max(ratios):.2f} (n{n})"))
            continue
        data = files.get(f"ccl_bench_n{n}.json")
        if data:
            fastest = {}  # (collective, size) -> the fastest algorithm's row, graph mode
            for row in data.get("rows", []):
                if (row.get("mode") == "graph" and row.get("size", 0) >= 64 << 20
                        and "vs_memcpy" in row and "time_us" in row):
                    key = (row.get("collective"), row["size"])
                    if key not in fastest or row["time_us"] < fastest[key]["time_us"]:
                        fastest[key] = row
            ratios = [row["vs_memcpy"] for row in fastest.values()]
            if ratios:
                parts.append(("cudaMemcpy", f"{min(ratios):.2f}-{max(ratios):.2f} (n{n})"))
    if not parts:
        return None
    groups = []
    for against in ("NCCL", "cudaMemcpy"):
        figures = [text for what, text in parts if what == against]
        if figures:
            groups.append(f"ccl >= 64 MiB {' / '.join(figures)} of {against}")
    return "; ".join(groups)


def ops_headline(files):
    """The fused ops' fastest pattern against cuBLAS + NCCL (best_vs_nccl), where NCCL ran."""
    ratios = []
    for name, data in files.items():
        if data.get("benchmark", "").startswith(("gemm +", "all-gather +")):
            ratios += [row["best_vs_nccl"] for row in data.get("rows", []) if "best_vs_nccl" in row]
    if not ratios:
        return None
    return f"fused ops {min(ratios):.2f}-{max(ratios):.2f}x cuBLAS + NCCL"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", type=pathlib.Path)
    parser.add_argument("--what", default="scripts/gpu-check.sh")
    parser.add_argument("--index", type=pathlib.Path)
    args = parser.parse_args()
    record = args.record.resolve()
    if not record.is_dir():
        sys.exit(f"results-index: {record} is not a directory")
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2})-(.+)", record.name)
    if not match:
        sys.exit(f"results-index: {record.name} is not named <date>-<commit>")
    date, commit = match.groups()
    machine = record.parent.name
    index = args.index or record.parent.parent / "INDEX.md"
    files = load_json_files(record)
    figures = [h for h in (tests_headline(record), rma_headline(files), peer_headline(files),
                           signal_headline(files), barrier_headline(files), ccl_headline(files),
                           ops_headline(files)) if h]
    rel = f"{machine}/{record.name}/"
    row = (f"| [{rel}]({rel}) | {date} | {commit} | {machine} | {args.what} | "
           f"{'; '.join(figures) or 'see the record'} |\n")
    if not index.exists():
        index.write_text("# Results records\n\n| record | date | commit | machine | what was run "
                         "| headline figures |\n|---|---|---|---|---|---|\n")
    with index.open("a") as out:
        out.write(row)
    print(f"results-index: {index}: {row}", end="")


if __name__ == "__main__":
    main()
