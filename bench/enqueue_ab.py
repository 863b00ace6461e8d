"""Enqueue, portalq against PGQueuer, over many rounds in turn (issue 19).

    PQB_HOME=/tmp/pq-bench python bench/enqueue_ab.py [ROUNDS]

`make bench` times the batch enqueue over 20 batches of 1,000 jobs (about 0.4 s) three
times, and its repetitions moved by 1.5x on this machine (1.04-1.65x PGQueuer in one run):
too few to settle a ratio. Here the two adapters of `make bench` (bench_portalq.py and the
peer harness's bench_pgqueuer.py, unchanged) enqueue the same way, on the bench's own
PostgreSQL (bench/scale_common.py), ROUNDS times (30), in turn, the order alternating, each
into a table emptied before it (the adapters' reset_sql, as `make bench` does between
repetitions). Printed: each side's median jobs/s and the median of the per-round ratios
(portalq / PGQueuer of the same round), with their quartiles. ENQ_N (20,000) jobs a round,
ENQ_BATCH (1,000) a batch; ENQ_SINGLE (2,000) jobs one per transaction, 0 to leave out.
ENQ_OLD_BLOCK=0[,8192...]: more sides in the batch rounds, portalq with its COPY sent in
blocks of that size (0: psycopg's own, 32 KiB; jobs.enqueue_paths.COPY_BLOCK is portalq's),
for the A/B.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_common as sc  # noqa: E402

N = int(os.environ.get("ENQ_N", "20000"))
BATCH = int(os.environ.get("ENQ_BATCH", "1000"))
SINGLE = int(os.environ.get("ENQ_SINGLE", "2000"))
OLD_BLOCKS = [int(x) for x in os.environ.get("ENQ_OLD_BLOCK", "").split(",") if x != ""]


def _quartiles(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=4)
    return f"{statistics.median(xs):,.2f} ({q[0]:,.2f}-{q[2]:,.2f})"


def _rounds(rounds: int, run: Callable[[Any], Coroutine[Any, Any, float]], n: int,
            old_blocks: list[int] | None = None, line: float | None = None) -> None:
    from portalq.jobs import enqueue_paths

    ours = enqueue_paths.COPY_BLOCK
    sides: list[tuple[str, Any, int | None]] = [("portalq", sc.PQ, ours),
                                              ("pgqueuer", sc.PGQ, None)]
    for size in old_blocks or []:
        sides.append((f"portalq, {size} B blocks", sc.PQ, size))
    rates: dict[str, list[float]] = {name: [] for name, _, _ in sides}
    ratios: list[float] = []
    old_ratios: dict[str, list[float]] = {name: [] for name, _, _ in sides[2:]}
    for r in range(rounds):
        got = {}
        for name, a, block in (sides if r % 2 == 0 else sides[::-1]):
            if block is not None:
                enqueue_paths.COPY_BLOCK = block   # this bench process's own module
            sc.sql(a.db, a.reset_sql)
            got[name] = n / asyncio.run(run(a))
        for name in rates:
            rates[name].append(got[name])
        ratios.append(got["portalq"] / got["pgqueuer"])
        for name in old_ratios:
            old_ratios[name].append(got[name] / got["pgqueuer"])
    enqueue_paths.COPY_BLOCK = ours
    for name, xs in old_ratios.items():
        print(f"  {name} / PGQueuer, per round: {_quartiles(xs)}")
    for name, xs in rates.items():
        print(f"  {name:<9} jobs/s median {statistics.median(xs):>9,.0f}  "
              f"(quartiles {statistics.quantiles(xs, n=4)[0]:,.0f}-"
              f"{statistics.quantiles(xs, n=4)[2]:,.0f})")
    at = f"; {sum(x >= line for x in ratios)} of {rounds} rounds at {line}x or more" if line else ""
    print(f"  portalq / PGQueuer, per round: {_quartiles(ratios)}{at}")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    sc.ensure_server()
    sc.setup_both()
    print(f"batch: {N:,} jobs a round in batches of {BATCH:,}, {rounds} rounds")
    _rounds(rounds, lambda a: a.enqueue_batch(N, BATCH), N,
            OLD_BLOCKS, line=1.5)      # issue 19's target for the batch
    if SINGLE:
        print(f"single: {SINGLE:,} jobs a round, one a transaction, {rounds} rounds")
        _rounds(rounds, lambda a: a.enqueue_single(SINGLE), SINGLE)


if __name__ == "__main__":
    main()
