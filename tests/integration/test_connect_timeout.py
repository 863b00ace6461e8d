"""Every connection portalq opens carries the connect timeout: the CLI's and the queue's
(sync), the service's listener, tick and pool (async, same DSN; `portalq run` itself is in
tests/acceptance/test_bad_input.py). A server that accepts TCP
and never answers ends the attempt after the timeout instead of hanging."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from portalq.jobs import queue
from portalq.jobs.db.location import database_url, libpq_dsn
from portalq.scheduler.config import Settings
from portalq.scheduler.worker import make_pool


@pytest.fixture
def silent_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)  # the kernel accepts; nobody ever answers
        url = f"postgresql://portalq:s3cret@127.0.0.1:{s.getsockname()[1]}/portalq"
        monkeypatch.setenv("PORTALQ_DATABASE_URL", url)
        monkeypatch.setenv("PORTALQ_CONNECT_TIMEOUT_SECONDS", "2")
        yield url


def _bounded(seconds: float, what: str):  # type: ignore[no-untyped-def]
    class Timer:
        def __enter__(self) -> None:
            self.t0 = time.monotonic()

        def __exit__(self, *exc: object) -> None:
            elapsed = time.monotonic() - self.t0
            assert elapsed < seconds, f"{what} took {elapsed:.1f}s"
    return Timer()


def test_sync_connections_time_out(silent_url):
    with _bounded(20, "queue.connect"), pytest.raises(psycopg.OperationalError,
                                                      match="timeout"):
        with queue.connect():
            pass
    with _bounded(20, "list_jobs"), pytest.raises(psycopg.OperationalError):
        queue.list_jobs()


def test_async_connections_and_the_pool_time_out(silent_url):
    dsn = libpq_dsn(database_url(silent_url, connect_timeout=2))

    async def listener() -> None:  # as Worker.listen and Tick connect
        await psycopg.AsyncConnection.connect(dsn, autocommit=True)

    with _bounded(20, "async connect"), pytest.raises(psycopg.OperationalError,
                                                      match="timeout"):
        asyncio.run(listener())

    # the pool opens its connections from the same DSN
    pool = make_pool(Settings(workers=1, connect_timeout_seconds=2), dsn)
    assert conninfo_to_dict(pool.conninfo)["connect_timeout"] == "2"
