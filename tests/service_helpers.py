"""Running real ``portalq run`` processes in tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import ROOT
from tests.plugins.ledger import LEDGER_DDL


def add_local_portal(dsn: str, code: str = "local", max_sessions: int | None = None) -> None:
    """A 24/7 portal for queue tests (optionally with a session limit)."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("INSERT INTO portalq.portals (code, name, timezone, max_concurrent_sessions) "
                  "VALUES (%s, %s, 'UTC', %s)", (code, code, max_sessions))
        c.execute("INSERT INTO portalq.portal_hours (portal, weekday, opens, closes) "
                  "SELECT %s, d, '00:00', '00:00' FROM generate_series(0, 6) d", (code,))
        c.execute(LEDGER_DDL)


class Service:
    """A ``portalq run`` subprocess with the ledger plugin loaded. Its jobs go stale after
    10 s: a node starved of CPU for seconds on a busy machine must not fence itself in a
    test about something else; tests of the rescue itself say 3 s."""

    def __init__(self, db_url: str, tmp: Path, name: str = "n1",
                 wrap: Any = None, **env: Any) -> None:
        self.name = name
        #: wraps the command line (e.g. NetNs.cmd: run the node in a network namespace)
        self.wrap = wrap or (lambda argv: argv)
        self.log_path = tmp / f"{name}.log"
        self.env = {**os.environ, "PORTALQ_DATABASE_URL": db_url, "PORTALQ_NODE_ID": name,
                    "PORTALQ_PLUGINS": "tests.plugins.ledger", "PORTALQ_HOME": str(tmp),
                    "PORTALQ_TICK_SECONDS": "1", "PORTALQ_HEARTBEAT_SECONDS": "0.5",
                    "PORTALQ_STALE_AFTER_SECONDS": "10", "PORTALQ_POLL_SECONDS": "0.2",
                    # mail gathered for seconds, not the minutes of real incidents (their
                    # defaults): tests of the gathering itself set their own
                    "PORTALQ_MAIL_GATHER_SECONDS": "5", "PORTALQ_MAIL_REPLY_SECONDS": "5",
                    "PYTHONPATH": str(ROOT), **{k: str(v) for k, v in env.items()}}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> Service:
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.wrap([sys.executable, "-m", "portalq", "run"]),
                                     env=self.env,
                                     stdout=subprocess.PIPE, stderr=self._log, cwd=ROOT)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.proc.stdout.readline()  # blocks until "portalq ready" (or exit)
        if b"portalq ready" not in line or time.monotonic() > deadline:
            raise RuntimeError(f"service {self.name} did not start:\n{self.log()}")
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        if hasattr(self, "_log"):
            self._log.close()


@contextlib.asynccontextmanager
async def worker_in_process(settings: Any, dsn: str, grace: float = 5) -> AsyncIterator[Any]:
    """A Worker wired as ``scheduler.service.serve`` wires it (its pool, its loops), in this
    process; stopped gracefully on the way out."""
    from portalq.scheduler.worker import Worker, make_pool

    pool = make_pool(settings, dsn)
    await pool.open(wait=True, timeout=30)
    try:
        worker = Worker(settings, pool, dsn)
        await worker.refresh_portals()
        loops = worker.start_loops()
        try:
            yield worker
        finally:
            await worker.stop_loops(loops, grace)
    finally:
        await pool.close()


def wait_until(predicate: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll a database condition until true (a deadline, not a sleep-and-hope)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def health(port: int) -> dict[str, Any]:
    import json
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
        return json.loads(r.read())


def wait_for_ticks(port: int, n: int, timeout: float = 60) -> None:
    """Wait until the service on metrics ``port`` has completed ``n`` more ticks (its
    /health ``last_tick`` changed n times): "later ticks did not do X", without a sleep."""
    seen, count = health(port)["last_tick"], 0

    def advanced() -> bool:
        nonlocal seen, count
        now = health(port)["last_tick"]
        if now != seen:
            seen, count = now, count + 1
        return count >= n

    wait_until(advanced, timeout, f"{n} more ticks", interval=0.1)


def open_all_hours(dsn: str) -> None:
    """Every portal open 24/7, no holidays, no cut-off (flows tests run at any hour)."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DELETE FROM portalq.portal_hours")
        c.execute("INSERT INTO portalq.portal_hours (portal, weekday, opens, closes) "
                  "SELECT code, d, '00:00', '00:00' FROM portalq.portals, generate_series(0, 6) d")
        c.execute("UPDATE portalq.portals SET holiday_country = NULL, holiday_subdiv = NULL, "
                  "cutoff_minutes = 0")


def start_server_thread(server: Any, what: str) -> threading.Thread:
    """Run a uvicorn ``Server`` in a daemon thread; return once it accepts connections."""
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started or not thread.is_alive(), 20, f"{what} to start",
               interval=0.02)
    if not thread.is_alive():
        raise RuntimeError(f"{what} did not start")
    return thread


def weekday_after_server_start(conn: psycopg.Connection[Any], weekday: int,
                               hour: int) -> datetime:
    """The first ``weekday`` (0 = Monday) at ``hour`` UTC, a day or more after the server's
    start: a frozen clock for a test that rescues stale jobs. A heartbeat counts from the
    server's start at the earliest (stale_running), so a clock frozen at a fixed date stops
    rescuing anything once the server was started after it -- a test that passes until
    that day and fails from then on."""
    row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    assert row is not None
    day = (row[0] + timedelta(days=1)).astimezone(UTC).date()
    day += timedelta(days=(weekday - day.weekday()) % 7)
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC)


def files_under(root: Path) -> list[tuple[Path, os.stat_result]]:
    """Every regular file under ``root`` (symlinks not followed) with its stat. For a live
    server's data directory, shared with the tests running beside: a database they drop
    meanwhile takes its folder with it, so what vanishes during the walk is skipped."""
    import stat

    out = []
    for folder, _dirs, files in os.walk(root):   # os.walk skips folders it cannot list
        for name in files:
            path = Path(folder, name)
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append((path, st))
    return out
