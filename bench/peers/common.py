"""The peer benchmark's harness: portalq, PGQueuer and Procrastinate measured the same way,
in the same run, on one PostgreSQL (``bench/peers/run.py`` drives it; ``make bench``).

A driver (``bench_<lib>.py``) gives an :class:`Adapter`: how its library enqueues (its public
API), how to start one of its workers, what "not finished" means in its tables. Everything
that decides a figure is here, shared:

- **enqueue**: ``N`` no-op jobs one per transaction, then ``N`` in batches of ``BATCH``;
  the queue emptied and a CHECKPOINT before each.
- **drain**: ``N`` jobs enqueued first (not timed), ANALYZE and CHECKPOINT, workers started
  and imported, then released together (a READY/GO handshake on a pipe and stdin: imports
  are not timed); timed until nothing is unfinished, checked every ``POLL_MS``; cut off at
  ``DRAIN_TIMEOUT`` (then the jobs done so far count, marked partial).
- **pickup**: one idle worker, ``LAT_SAMPLES`` jobs enqueued ``LAT_GAP_MS`` apart, each
  from the return of its committed enqueue to its handler's start (the handler appends
  ``index time`` to a file); three warm-up jobs first.
- **RSS**: a worker's peak resident size (VmHWM) read from /proc; the idle one's after the
  pickup samples.

Each ``run`` is one repetition of every figure, appended as JSON lines to ``$OUT``.

Knobs (environment): N BATCH PGHOST PGPORT PGUSER LAT_SAMPLES LAT_GAP_MS DRAIN_TIMEOUT
POLL_MS DRAIN_CONFIGS (``<processes>x<def|10>``, comma separated) FIGURES LOGDIR.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg

N = int(os.environ.get("N", "20000"))
BATCH = int(os.environ.get("BATCH", "1000"))
PGHOST = os.environ.get("PGHOST", "127.0.0.1")
PGPORT = int(os.environ.get("PGPORT", "55434"))
PGUSER = os.environ.get("PGUSER", "postgres")
LAT_SAMPLES = int(os.environ.get("LAT_SAMPLES", "200"))
LAT_GAP_MS = float(os.environ.get("LAT_GAP_MS", "20"))
DRAIN_TIMEOUT = float(os.environ.get("DRAIN_TIMEOUT", "15"))
POLL_MS = float(os.environ.get("POLL_MS", "20"))
DRAIN_CONFIGS = os.environ.get("DRAIN_CONFIGS", "1xdef,2xdef,1x10,2x10").split(",")
FIGURES = os.environ.get("FIGURES", "enqueue,drain,latency").split(",")
LOGDIR = os.environ.get("LOGDIR", "/tmp/pq-peers/logs")


def dsn(db: str) -> str:
    return f"postgresql://{PGUSER}@{PGHOST}:{PGPORT}/{db}"


def admin(statement: str, db: str = "postgres") -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn(db), autocommit=True) as c:
        cur = c.execute(statement)  # type: ignore[arg-type]
        return cur.fetchall() if cur.pgresult and cur.pgresult.ntuples else []


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    at = (len(xs) - 1) * p / 100
    low = int(at)
    high = min(low + 1, len(xs) - 1)
    return xs[low] + (xs[high] - xs[low]) * (at - low)


def record(out: str, fields: dict[str, Any]) -> None:
    line = json.dumps({"ts": time.time(), **fields})
    print("  " + line, flush=True)
    with open(out, "a") as f:
        f.write(line + "\n")


# ------------------------------------------------------------ in the worker process


def worker_handshake() -> None:
    """In a worker, once imported and built: say READY on the pipe ``READY_FD``, then wait
    for GO on stdin (what follows is timed). It dies with its driver (PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)
    except OSError:
        pass
    fd = int(os.environ["READY_FD"])
    os.write(fd, b"R")
    os.close(fd)
    if not sys.stdin.readline():
        sys.exit(1)


class LatencyRecorder:
    """A handler's call: ``index time`` appended to ``$LAT_FILE`` (line-buffered)."""

    def __init__(self) -> None:
        path = os.environ.get("LAT_FILE")
        self.out = open(path, "a", buffering=1) if path else None   # noqa: SIM115

    def __call__(self, index: int) -> None:
        if self.out is not None:
            self.out.write(f"{index} {time.time():.6f}\n")


# ------------------------------------------------------------ in the driver


@dataclass
class Adapter:
    name: str
    version: str
    db: str
    setup: Callable[[], None]
    reset_sql: str
    pending_sql: str
    exists_sql: str
    enqueue_single: Callable[[int], Awaitable[float]]
    enqueue_batch: Callable[[int, int], Awaitable[float]]
    latency_enqueue: Callable[[list[int], float], Awaitable[dict[int, float]]]
    worker_cmd: Callable[[str, str], list[str]]
    settings: dict[str, Any]


class Worker:
    """A worker process, started with the READY pipe, released by :meth:`go`."""

    def __init__(self, argv: list[str], env: dict[str, str], log: str) -> None:
        ready, theirs = os.pipe()
        self.ready = ready
        self.log = open(log, "a")   # noqa: SIM115
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=subprocess.STDOUT, pass_fds=(theirs,),
                                     env={**env, "READY_FD": str(theirs)},
                                     start_new_session=True)
        os.close(theirs)

    def wait_ready(self, timeout: float = 60) -> None:
        readable, _, _ = select.select([self.ready], [], [], timeout)
        if not readable or os.read(self.ready, 1) != b"R":
            raise RuntimeError(f"worker {self.proc.pid} not ready (exit {self.proc.poll()})")
        os.close(self.ready)

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"GO\n")
        self.proc.stdin.flush()

    def _proc(self, name: str) -> str:
        with open(f"/proc/{self.proc.pid}/{name}") as f:
            return f.read()

    def peak_rss_mib(self) -> float:
        for line in self._proc("status").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_seconds(self) -> float:
        fields = self._proc("stat").rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log.close()


def _workers(a: Adapter, count: int, conc: str, mode: str, env: dict[str, str]) -> list[Worker]:
    started: list[Worker] = []
    try:
        for _ in range(count):
            started.append(Worker(a.worker_cmd(conc, mode), env,
                                  os.path.join(LOGDIR, f"{a.name}-worker.log")))
        for w in started:
            w.wait_ready()
    except BaseException:
        for w in started:
            w.stop()
        raise
    return started


def _empty(a: Adapter) -> None:
    admin(a.reset_sql, a.db)
    admin("CHECKPOINT")


async def enqueue_figures(a: Adapter, out: str, rep: int) -> None:
    _empty(a)
    secs = await a.enqueue_single(N)
    record(out, {"lib": a.name, "rep": rep, "fig": "enqueue_single", "n": N, "secs": secs,
                 "jobs_s": N / secs})
    _empty(a)
    secs = await a.enqueue_batch(N, BATCH)
    record(out, {"lib": a.name, "rep": rep, "fig": "enqueue_batch", "n": N, "batch": BATCH,
                 "secs": secs, "jobs_s": N / secs})


async def drain_figures(a: Adapter, out: str, rep: int) -> None:
    for config in DRAIN_CONFIGS:
        count, conc = config.split("x")
        _empty(a)
        await a.enqueue_batch(N, BATCH)
        admin("ANALYZE", a.db)
        admin("CHECKPOINT")
        assert admin(a.pending_sql, a.db)[0][0] == N
        workers = _workers(a, int(count), conc, "drain", dict(os.environ))
        try:
            with psycopg.connect(dsn(a.db), autocommit=True) as poll:
                cpu = sum(w.cpu_seconds() for w in workers)
                start = time.perf_counter()
                for w in workers:
                    w.go()
                partial = False
                while poll.execute(a.exists_sql).fetchone()[0]:  # type: ignore[index,arg-type]
                    if time.perf_counter() - start > DRAIN_TIMEOUT:
                        partial = True
                        break
                    if any(w.proc.poll() is not None for w in workers):
                        raise RuntimeError(f"a {a.name} worker died: see {LOGDIR}")
                    time.sleep(POLL_MS / 1000)
                secs = time.perf_counter() - start
                left = poll.execute(a.pending_sql).fetchone()[0] if partial else 0  # type: ignore[index,arg-type]
            rss = max(w.peak_rss_mib() for w in workers)
            cpu = sum(w.cpu_seconds() for w in workers) - cpu
        finally:
            for w in workers:
                w.stop()
        record(out, {"lib": a.name, "rep": rep, "fig": f"drain_{config}", "n": N,
                     "done": N - left, "secs": secs, "jobs_s": (N - left) / secs,
                     "timed_out": partial, "peak_rss_mib": rss,
                     "worker_cpu_pct": 100 * cpu / secs})


def _started(path: str) -> dict[int, float]:
    seen: dict[int, float] = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2:
                    seen[int(parts[0])] = float(parts[1])
    return seen


async def _until_started(path: str, wanted: set[int], timeout: float) -> dict[int, float]:
    end = time.time() + timeout
    while True:
        seen = _started(path)
        if wanted <= seen.keys() or time.time() > end:
            return seen
        await asyncio.sleep(0.05)


async def pickup_figures(a: Adapter, out: str, rep: int) -> None:
    _empty(a)
    path = os.path.join(LOGDIR, f"{a.name}-pickup.txt")
    if os.path.exists(path):
        os.unlink(path)
    [worker] = _workers(a, 1, "def", "latency", {**os.environ, "LAT_FILE": path})
    try:
        worker.go()
        warm = [-1, -2, -3]
        await a.latency_enqueue(warm, 0.05)
        if not set(warm) <= (await _until_started(path, set(warm), 30)).keys():
            raise RuntimeError(f"the {a.name} worker never started its warm-up jobs")
        await asyncio.sleep(0.5)
        ids = list(range(LAT_SAMPLES))
        committed = await a.latency_enqueue(ids, LAT_GAP_MS / 1000)
        started = await _until_started(path, set(ids), 15)
        rss = worker.peak_rss_mib()
    finally:
        worker.stop()
    ms = [(started[i] - committed[i]) * 1000 for i in ids if i in started]
    record(out, {"lib": a.name, "rep": rep, "fig": "latency", "samples": len(ms),
                 "missing": len(ids) - len(ms), "p50_ms": percentile(ms, 50),
                 "p95_ms": percentile(ms, 95), "p99_ms": percentile(ms, 99),
                 "max_ms": max(ms) if ms else float("nan"), "idle_worker_rss_mib": rss})


def main(a: Adapter, worker_main: Callable[[str, str], None]) -> None:
    """``<driver> setup`` (a fresh database and the library's schema), ``meta`` (its
    version and settings, recorded), ``run`` (one repetition), ``worker CONC MODE``."""
    command = sys.argv[1] if len(sys.argv) > 1 else "run"
    out = os.environ.get("OUT", "/tmp/pq-peers/results.jsonl")
    if command == "worker":
        worker_main(sys.argv[2], sys.argv[3])
    elif command == "setup":
        admin(f"DROP DATABASE IF EXISTS {a.db} WITH (FORCE)")
        admin(f"CREATE DATABASE {a.db}")
        a.setup()
        print(f"[{a.name}] schema made in {a.db}", flush=True)
    elif command == "meta":
        record(out, {"lib": a.name, "fig": "meta", "version": a.version, "n": N,
                     "batch": BATCH, "settings": a.settings,
                     "python": sys.version.split()[0],
                     "postgres": admin("SHOW server_version")[0][0]})
    elif command == "run":
        rep = int(os.environ.get("REP", "1"))
        os.makedirs(LOGDIR, exist_ok=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # unwind: workers stopped
        print(f"[{a.name} {a.version}] repetition {rep}, N={N}, {FIGURES}", flush=True)
        if "enqueue" in FIGURES:
            asyncio.run(enqueue_figures(a, out, rep))
        if "drain" in FIGURES:
            asyncio.run(drain_figures(a, out, rep))
        if "latency" in FIGURES:
            asyncio.run(pickup_figures(a, out, rep))
    else:
        raise SystemExit(f"unknown command {command!r}: setup, meta, run or worker")
