"""The peer benchmark's table from its JSON lines: each figure's median (min-max) over the
repetitions, per library, and portalq's ratio to PGQueuer (higher is better for rates;
for pickup and RSS it is portalq's value over PGQueuer's, lower is better).

    python bench/peers/report.py RESULTS.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from typing import Any

FIGURES = [("enqueue, 1 job per transaction (jobs/s)", "enqueue_single", "jobs_s"),
           ("enqueue, batches (jobs/s)", "enqueue_batch", "jobs_s"),
           ("drain, 1 process, default (jobs/s)", "drain_1xdef", "jobs_s"),
           ("drain, 2 processes, default (jobs/s)", "drain_2xdef", "jobs_s"),
           ("drain, 1 process, conc=10 (jobs/s)", "drain_1x10", "jobs_s"),
           ("drain, 2 processes, conc=10 (jobs/s)", "drain_2x10", "jobs_s"),
           ("pickup p50 (ms)", "latency", "p50_ms"),
           ("pickup p99 (ms)", "latency", "p99_ms"),
           ("idle worker RSS (MiB)", "latency", "idle_worker_rss_mib")]


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path) if line.strip()]
    meta = {r["lib"]: r for r in rows if r["fig"] == "meta"}
    libs = list(meta) or sorted({r["lib"] for r in rows})
    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    partial: dict[tuple[str, str], int] = defaultdict(int)
    for r in rows:
        if r["fig"] == "meta":
            continue
        for key, value in r.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                values[(r["lib"], r["fig"], key)].append(float(value))
        partial[(r["lib"], r["fig"])] += bool(r.get("timed_out"))

    def median(lib: str, fig: str, key: str) -> float | None:
        xs = values.get((lib, fig, key))
        return statistics.median(xs) if xs else None

    def cell(lib: str, fig: str, key: str) -> str:
        xs = values.get((lib, fig, key))
        if not xs:
            return "-"
        digits = 0 if key == "jobs_s" or "rss" in key else 1
        text = (f"{statistics.median(xs):,.{digits}f} "
                f"({min(xs):,.{digits}f}-{max(xs):,.{digits}f})")
        if partial[(lib, fig)]:
            text += f" cut off {partial[(lib, fig)]}/{len(xs)}"
        return text

    header = ["figure", *(f"{lib} {meta[lib]['version']}" if lib in meta else lib
                          for lib in libs)]
    ratio = "portalq" in libs and "pgqueuer" in libs
    if ratio:
        header.append("portalq / PGQueuer")
    table = [header]
    summary: dict[str, Any] = {}
    for label, fig, key in FIGURES:
        line = [label, *(cell(lib, fig, key) for lib in libs)]
        if ratio:
            ours, theirs = median("portalq", fig, key), median("pgqueuer", fig, key)
            line.append(f"{ours / theirs:.2f}x" if ours and theirs else "-")
            summary[f"{fig}.{key}"] = {"portalq": ours, "pgqueuer": theirs}
        table.append(line)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for i, r in enumerate(table):
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
        if i == 0:
            print("-+-".join("-" * w for w in widths))
    reps = max((len(v) for (_, f, k), v in values.items() if k == "jobs_s"), default=0)
    n = next((r.get("n") for r in rows if r.get("n")), "?")
    print(f"N={n}, {reps} repetitions; median (min-max); a drain cut off counts the jobs done")
    for lib in libs:
        if lib in meta:
            print(f"{lib}: " + "; ".join(f"{k}: {v}" for k, v in meta[lib]["settings"].items()))
    with open(path + ".summary.json", "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
