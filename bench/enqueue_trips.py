"""Round trips and statements of one enqueue, counted from libpq's protocol trace.

    .venv/bin/python bench/enqueue_trips.py     # embedded server in /tmp/pq-secrets-bench

Client side and exact: every message the client sends is traced (``PGconn.trace``); a
round trip is a ``Sync`` (extended protocol), a simple ``Query`` or a ``CopyDone`` (the
COPY's end waits for its result); a statement is an ``Execute`` or a ``Query``. For the
job types of bench/secrets_bench.py (plain, and sealed: secrets bound to the job's id).
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg  # noqa: E402

import bench.secrets_bench as sb  # noqa: E402
from portalq.jobs.queue import NewJob, enqueue, enqueue_many  # noqa: E402


def traced(conn: psycopg.Connection[Any], fn: Callable[[], object]) -> tuple[int, int]:
    with tempfile.TemporaryFile("w+") as f:
        conn.pgconn.trace(f.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            fn()
        finally:
            conn.pgconn.untrace()
        f.seek(0)
        sent = collections.Counter(
            parts[2].split(" ")[0] for parts in (ln.rstrip("\n").split("\t") for ln in f)
            if len(parts) > 2 and parts[0] == "F")
    return sent["Sync"] + sent["Query"] + sent["CopyDone"], sent["Execute"] + sent["Query"]


def main() -> None:
    url = sb.setup()
    n = [0]

    def p() -> dict[str, Any]:
        n[0] += 1
        return sb.payload(n[0])

    def show(what: str, conn: psycopg.Connection[Any], fn: Callable[[], object]) -> None:
        trips, statements = traced(conn, fn)
        print(f"{what:<58} {trips:>5} {statements:>5}")

    def own_transaction(c: psycopg.Connection[Any], jt: str) -> None:
        show(f"{jt}: enqueue, 1st on a connection", c,
             lambda: enqueue(jt, "bench", p(), conn=c))
        for _ in range(300):
            enqueue(jt, "bench", p(), conn=c)
        show(f"{jt}: 100 enqueues in a burst", c,
             lambda: [enqueue(jt, "bench", p(), conn=c) for _ in range(100)])
        show(f"{jt}: enqueue, new idempotency key", c,
             lambda: enqueue(jt, "bench", p(), conn=c, idempotency_key=f"k{n[0]}"))
        show(f"{jt}: enqueue, existing idempotency key", c,
             lambda: enqueue(jt, "bench", p(), conn=c, idempotency_key=f"k{n[0] - 1}"))
        show(f"{jt}: enqueue_many of 10", c,
             lambda: enqueue_many([NewJob(jt, "bench", p()) for _ in range(10)], conn=c))
        show(f"{jt}: enqueue_many of 10 with keys", c, lambda: enqueue_many(
            [NewJob(jt, "bench", p(), idempotency_key=f"m{n[0]}") for _ in range(10)], conn=c))
        show(f"{jt}: enqueue_many of 500 (COPY)", c,
             lambda: enqueue_many([NewJob(jt, "bench", p()) for _ in range(500)], conn=c))

    def callers_transaction(c: psycopg.Connection[Any], jt: str) -> None:
        for _ in range(10):
            enqueue(jt, "bench", p(), conn=c)
        show(f"{jt}: enqueue in the caller's transaction", c,
             lambda: enqueue(jt, "bench", p(), conn=c))
        show(f"{jt}: enqueue_many of 500 in the caller's tx", c,
             lambda: enqueue_many([NewJob(jt, "bench", p()) for _ in range(500)], conn=c))

    print(f"{'one call of':<58} {'trips':>5} {'stmts':>5}")
    with sb._conn(url) as c:   # autocommit: the enqueue's own transaction
        for jt in ("bench_plain", "bench_sealed"):
            own_transaction(c, jt)
    from portalq.jobs.db.location import libpq_dsn

    with psycopg.connect(libpq_dsn(url)) as c:
        for jt in ("bench_plain", "bench_sealed"):
            callers_transaction(c, jt)
    print(f"(load average {os.getloadavg()[0]:.1f}; counts do not depend on it)")


if __name__ == "__main__":
    main()
