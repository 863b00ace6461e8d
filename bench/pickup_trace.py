"""Where a pickup's time goes (issue 19: pickup p99 at 1 M waiting), split by the worker's
own claim calls.

    .venv/bin/python bench/pickup_trace.py [DEPTH]    # default 1,000,000 waiting (not due)

The bench's own PostgreSQL (scale_common: $PQB_HOME, $PQB_PORT). Fills portalq's database to
DEPTH waiting jobs (as `scale_bench.py depth`; PGQueuer's table only with TRACE_PGQ=1,
then a PGQueuer drain runs before each round, as between the depth part's repetitions),
then TRACE_ROUNDS (5) pickup-latency rounds of LAT_SAMPLES (200) each, the worker tracing
its claims (bench_portalq's PQ_CLAIM_TRACE). Each sample (commit of its enqueue -> start
of its handler) is split at the claim that returned it:

* wake:  commit -> the claim's send (NOTIFY delivered, the listener's wake-up, the claim
  loop's turn);
* claim: the claim's round trip (the statement and its commit, on the server);
* start: the claim's return -> the handler's start (the task's first turn).
"""

from __future__ import annotations

import bisect
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_common as sc  # noqa: E402

ROUNDS = int(os.environ.get("TRACE_ROUNDS", "5"))
WITH_PGQ = os.environ.get("TRACE_PGQ") == "1"
AB = os.environ.get("TRACE_AB") == "1"


def _pct(xs: list[float], q: float) -> float:
    return sc.common.pct(xs, q) if xs else float("nan")


def _split(commits: dict[int, float], starts: dict[int, float],
           claims: list[tuple[float, float, int]]) -> list[tuple[float, float, float, float, int]]:
    """(total, wake, claim, start) in ms for each sample, at the last claim that returned
    jobs before its handler started."""
    claims = sorted(c for c in claims if c[2] > 0)
    backs = [c[1] for c in claims]
    out = []
    for i, c in commits.items():
        s = starts.get(i)
        if s is None:
            continue
        k = bisect.bisect_right(backs, s) - 1
        if k < 0:
            continue
        sent, back, _ = claims[k]
        out.append(((s - c) * 1e3, (sent - c) * 1e3, (back - sent) * 1e3, (s - back) * 1e3,
                    i))
    return out


def _read_claims(path: Path) -> list[tuple[float, float, int]]:
    out = []
    for line in path.read_text().splitlines():
        p = line.split()
        if len(p) == 3:
            out.append((float(p[0]), float(p[1]), int(p[2])))
    return out


def main() -> None:
    depth = int(sys.argv[1].replace(",", "").replace("_", "")) if len(sys.argv) > 1 else 1_000_000
    sc.ensure_server()
    sc.setup_both()
    sc.fill_waiting_portalq(depth)
    if WITH_PGQ:
        sc.fill_waiting_pgqueuer(depth)
    trace = sc.HOME / "logs" / "claims.txt"
    os.environ["PQ_CLAIM_TRACE"] = str(trace)
    commits: dict[int, float] = {}
    enqueue = sc.PQ.latency_enqueue

    async def recorded(ids: list[int], gap: float) -> dict[int, float]:
        got = await enqueue(ids, gap)
        commits.update(got)
        return got

    sc.PQ.latency_enqueue = recorded
    every: dict[str, list[tuple[float, float, float, float, int]]] = {}
    print(f"{depth:,} waiting; rounds of {sc.LAT_SAMPLES} samples, ms "
          "(total = wake + claim + start)")
    for rnd in range(ROUNDS):
        if WITH_PGQ:
            sc.drain(sc.PGQ, 10_000)
        variant = "all"
        if AB:   # alternate rounds: the startup heap collected as before (0) or settled (1)
            os.environ["PQ_GC_FREEZE"] = ("0", "1")[rnd % 2]
            variant = ("heap not settled", "heap settled")[rnd % 2]
        trace.unlink(missing_ok=True)
        commits.clear()
        sc.latency(sc.PQ)
        # the samples, not latency()'s warm-up jobs (ids 1,000,001-1,000,003)
        rows = _split({i: t for i, t in commits.items() if i < 1_000_000},
                      sc.read_starts(sc.HOME / "logs" / "portalq-lat.txt"), _read_claims(trace))
        every.setdefault(variant, []).extend(rows)
        _report(f"round {rnd + 1}" + (f" ({variant})" if AB else ""), rows)
    for variant, rows in every.items():
        _report(variant, rows)


def _report(label: str, rows: list[tuple[float, float, float, float, int]]) -> None:
    cols = list(zip(*rows, strict=True))[:4] if rows else [[], [], [], []]
    parts = "  ".join(f"{name} p50 {_pct(list(xs), 50):5.1f} p99 {_pct(list(xs), 99):5.1f}"
                      for name, xs in zip(("total", "wake", "claim", "start"), cols,
                                          strict=True))
    print(f"{label:18s} n={len(rows):4d}  {parts}  (load {sc.load_average()})", flush=True)
    slow = sorted(rows, reverse=True)[:3]
    if slow:
        print(" " * 19 + "slowest: " + "; ".join(
            f"#{i} {t:.1f} = {w:.1f} + {c:.1f} + {s:.1f}" for t, w, c, s, i in slow),
            flush=True)


if __name__ == "__main__":
    main()
