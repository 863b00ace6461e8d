"""Instructions per enqueued job (client process, user space), plain and sealed, by cachegrind.

    .venv/bin/python bench/enqueue_instructions.py      # embedded server in /tmp/pq-secrets-bench

Exact and independent of the machine's load: each measure runs this script under
``valgrind --tool=cachegrind --cache-sim=no`` twice, once enqueuing ``N`` jobs after a
warm-up and once enqueuing none, and divides the difference by ``N``. Single = ``N``
``enqueue`` calls on one autocommit connection; batch = ``enqueue_many`` of 500 (the COPY
path). Job types and payloads of bench/secrets_bench.py. Also the WAL bytes per job of the
batch (``pg_current_wal_lsn()`` before and after, the server alone). PQ_SINGLE (1000),
PQ_BATCH_N (10000) set ``N``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench.secrets_bench as sb  # noqa: E402
from portalq.jobs.queue import NewJob, enqueue, enqueue_many  # noqa: E402

SINGLE = int(os.environ.get("PQ_SINGLE", "1000"))
BATCH_N = int(os.environ.get("PQ_BATCH_N", "10000"))


def run(mode: str, job_type: str, n: int) -> None:
    """The measured part (under valgrind): a warm-up, then ``n`` jobs."""
    url = os.environ["PORTALQ_DATABASE_URL"]
    with sb._conn(url) as c:
        if mode == "single":
            for i in range(300):   # warm: prepared statements, id blocks grown
                enqueue(job_type, "bench", sb.payload(i), conn=c)
            for i in range(n):
                enqueue(job_type, "bench", sb.payload(i), conn=c)
        else:
            for _ in range(2):
                enqueue_many([NewJob(job_type, "bench", sb.payload(i)) for i in range(500)],
                             conn=c)
            for off in range(0, n, 500):
                enqueue_many([NewJob(job_type, "bench", sb.payload(off + i))
                              for i in range(500)], conn=c)


def instructions(mode: str, job_type: str, n: int) -> int:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "cg.out"
        done = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
             sys.executable, __file__, "--run", mode, job_type, str(n)],
            capture_output=True, text=True, check=True)
        m = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        assert m, done.stderr[-2000:]
        return int(m.group(1).replace(",", ""))


def wal_bytes(url: str, job_type: str, n: int) -> tuple[float, float]:
    with sb._conn(url) as c:
        sb._clear(url)
        before = c.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        for off in range(0, n, 500):
            enqueue_many([NewJob(job_type, "bench", sb.payload(off + i)) for i in range(500)],
                         conn=c)
        diff = c.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)",
                         (before,)).fetchone()[0]
        size = c.execute("SELECT avg(pg_column_size(q.*)) FROM portalq.job_queue q").fetchone()[0]
    return float(diff) / n, float(size)


def main() -> None:
    url = sb.setup()
    print(f"instructions per job (cachegrind, client), single={SINGLE}, batch={BATCH_N} "
          f"(enqueue_many of 500)")
    results: dict[tuple[str, str], float] = {}
    for mode, n in (("single", SINGLE), ("batch", BATCH_N)):
        for job_type in ("bench_plain", "bench_sealed"):
            sb._clear(url)
            base = instructions(mode, job_type, 0)
            sb._clear(url)
            results[(mode, job_type)] = (instructions(mode, job_type, n) - base) / n
        plain, sealed = results[(mode, "bench_plain")], results[(mode, "bench_sealed")]
        print(f"{mode:<7} plain {plain / 1e3:7.1f}k  sealed {sealed / 1e3:7.1f}k  "
              f"+{(sealed - plain) / 1e3:.1f}k ({sealed / plain - 1:+.1%})")
    row: dict[str, Any] = {jt: wal_bytes(url, jt, BATCH_N)
                           for jt in ("bench_plain", "bench_sealed")}
    (wp, sp), (ws, ss) = row["bench_plain"], row["bench_sealed"]
    print(f"batch WAL bytes/job plain {wp:.0f} sealed {ws:.0f} ({ws / wp - 1:+.1%}); "
          f"row bytes plain {sp:.0f} sealed {ss:.0f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--run":
        run(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
