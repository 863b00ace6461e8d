"""How portalq's cost grows with its work (issue 19), beside PGQueuer in the same run.

    make bench-scale                         # all parts, about 45 min on a quiet machine
    python bench/scale_bench.py depth        # 0 / 100k / 1M jobs waiting, portalq and PGQueuer
    python bench/scale_bench.py history      # 10M finished jobs (+20M events); the prune
    python bench/scale_bench.py soak         # SOAK_MINUTES (10) at SOAK_RATE jobs/s (70 % of peak)
    python bench/scale_bench.py bulk         # enqueue-batch of 1M from a file; deferral of 1M
    python bench/scale_bench.py limit        # commit rate of a one-row insert vs enqueue, in turn
    python bench/scale_bench.py plot         # docs/benchmarks-soak.png from the soak's samples

Knobs (env): PQB_HOME (/tmp/pq-bench) PQB_PORT (55436) DEPTHS (0,100000,1000000)
DRAIN_N (20000) REPS (3) HISTORY_N (10000000) SOAK_MINUTES (10) SOAK_RATE (auto) BULK_N
(1000000) LAT_SAMPLES (200) LAT_GAP_MS (20). Results: $PQB_HOME/results/<part>.json.
Method and figures: docs/benchmarks.md ("How the cost grows with the work").
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale_common as sc  # noqa: E402

REPS = int(os.environ.get("REPS", "3"))
DRAIN_N = int(os.environ.get("DRAIN_N", "20000"))
DEPTHS = [int(x) for x in os.environ.get("DEPTHS", "0,100000,1000000").split(",")]
HISTORY_N = int(os.environ.get("HISTORY_N", "10000000"))
RESULTS = sc.HOME / "results"


def save(part: str, data: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{part}.json").write_text(json.dumps(data, indent=1))


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"


def medf(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})"


def _measure(label: str, rows: dict[str, Any]) -> None:
    """REPS alternating repetitions of drain (1 proc default conc, and conc=10) and pickup
    latency for both libraries at the current depth."""
    for rep in range(REPS):
        order = (sc.PQ, sc.PGQ) if rep % 2 == 0 else (sc.PGQ, sc.PQ)
        for a in order:
            r = rows.setdefault(label, {}).setdefault(a.name, {})
            for conc in ("def", "10"):
                d = sc.drain(a, DRAIN_N, conc=conc)
                r.setdefault(f"drain_{conc}", []).append(d["jobs_s"])
                r.setdefault("capped", []).append(d["capped"])
            lat = sc.latency(a)
            r.setdefault("p50", []).append(lat["p50_ms"])
            r.setdefault("p99", []).append(lat["p99_ms"])
            print(f"  {label} rep {rep + 1} {a.name}: drain def {r['drain_def'][-1]:,.0f} "
                  f"conc10 {r['drain_10'][-1]:,.0f} jobs/s, p50 {lat['p50_ms']:.1f} "
                  f"p99 {lat['p99_ms']:.1f} ms (load {sc.load_average()})", flush=True)


def report(rows: dict[str, Any], empty: str) -> None:
    print(f"\n{'waiting / history':22s} {'lib':9s} {'drain def (jobs/s)':>24s} "
          f"{'drain conc=10':>24s} {'p50 ms':>16s} {'p99 ms':>16s}")
    for label, libs in rows.items():
        for name, r in libs.items():
            print(f"{label:22s} {name:9s} {med(r['drain_def']):>24s} {med(r['drain_10']):>24s} "
                  f"{medf(r['p50']):>16s} {medf(r['p99']):>16s}")
        pq, pg = libs["portalq"], libs["pgqueuer"]
        base = rows[empty]["portalq"]
        m = statistics.median
        print(f"{'':22s} portalq/pgqueuer drain def {m(pq['drain_def']) / m(pg['drain_def']):.2f}x "
              f"conc10 {m(pq['drain_10']) / m(pg['drain_10']):.2f}x; portalq vs empty: "
              f"def {m(pq['drain_def']) / m(base['drain_def']):.2f}x "
              f"conc10 {m(pq['drain_10']) / m(base['drain_10']):.2f}x")


def depth() -> None:
    sc.ensure_server()
    sc.setup_both()
    rows: dict[str, Any] = {"load_before": sc.load_average()}
    have = 0
    for n in DEPTHS:
        sc.fill_waiting_portalq(n - have)
        sc.fill_waiting_pgqueuer(n - have)
        have = n
        _measure(f"{n:,} waiting", rows.setdefault("rows", {}))
        save("depth", rows)               # kept as it goes: a later depth may be cut off
    rows["load_after"] = sc.load_average()
    save("depth", rows)
    report(rows["rows"], f"{DEPTHS[0]:,} waiting")


def claimcost() -> None:
    """The claim statement's own cost at each depth (EXPLAIN ANALYZE, 1 and 50 jobs due)."""
    sc.ensure_server()
    sc.setup_both()
    out: dict[str, Any] = {}
    have = 0
    for n in DEPTHS:
        sc.fill_waiting_portalq(n - have)
        have = n
        out[str(n)] = {str(d): sc.claim_cost(d) for d in (1, 50)}
        print(f"  claim with {n:,} waiting: " + ", ".join(
            f"{d} due {v['ms']:.2f} ms / {v['buffers']} buffers" for d, v in out[str(n)].items()),
            flush=True)
    save("claimcost", out)


def main() -> None:
    part = sys.argv[1] if len(sys.argv) > 1 else "all"
    parts = {"depth": depth, "claimcost": claimcost}
    import scale_limit
    import scale_more
    import scale_plot
    import scale_soak

    for m in (scale_more, scale_limit, scale_soak, scale_plot):
        parts.update(m.PARTS)
    if part == "all":
        for name in ("limit", "claimcost", "depth", "bulk", "history", "soak", "plot"):
            if name in parts:
                parts[name]()
        return
    if part not in parts:
        raise SystemExit(f"scale_bench: error: unknown part {part!r}; one of {', '.join(parts)}")
    parts[part]()


if __name__ == "__main__":
    main()
