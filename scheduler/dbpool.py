"""The process's database connections: the pool (its checkout check and its reconnect
backoff), and :class:`Database`, which runs a write until the server takes it."""

from __future__ import annotations

import asyncio
import logging
import random
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from psycopg_pool import AsyncConnectionPool

from jobs import connections
from scheduler.config import Settings

log = logging.getLogger("portalq.worker")

T = TypeVar("T")

#: a pooled connection idle longer than this is tested (one query) before it is handed out
CHECK_IDLE_SECONDS = 2.0
_returned: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


async def _note_return(conn: connections.Connection) -> None:
    _returned[conn] = time.monotonic()


async def _usable(conn: connections.Connection) -> None:
    """The pool's check on checkout. A connection in use a moment ago (the busy case: the
    claim loop, completions, heartbeats) is handed out without a round trip; one that sat
    idle is tested first, so one that died meanwhile (a server restart) is replaced
    before a job's checkpoint or document write could fail on it."""
    if connections.is_broken(conn):
        raise connections.closed_error()
    if time.monotonic() - _returned.get(conn, 0.0) > CHECK_IDLE_SECONDS:
        await AsyncConnectionPool.check_connection(conn)


def _cap_pool_reconnects(cap: float) -> None:
    """psycopg_pool re-opens lost connections with a backoff that starts at 1 s and
    doubles without bound (1, 2, 4, 8 s ...): work resumed ~5.6 s after a PostgreSQL
    restart. Its attempts are objects of one class with tunable class constants; this
    gives the pool a subclass that starts at 50 ms and never waits longer than ``cap``."""
    from psycopg_pool import base, pool_async

    class CappedAttempt(base.AttemptWithBackoff):
        INITIAL_DELAY = 0.05
        DELAY_JITTER = 0.5

        def update_delay(self, now: float) -> None:
            super().update_delay(now)
            self.delay = min(self.delay, cap)

    if getattr(pool_async, "AttemptWithBackoff", None) is base.AttemptWithBackoff:
        pool_async.AttemptWithBackoff = CappedAttempt  # type: ignore[misc]


def make_pool(settings: Settings, dsn: str) -> AsyncConnectionPool:
    """The process's connection pool (opened by the caller)."""
    _cap_pool_reconnects(settings.reconnect_cap_seconds)
    return AsyncConnectionPool(dsn, min_size=2, max_size=settings.workers + 4, open=False,
                               kwargs={"autocommit": True, **settings.pool_options()},
                               reconnect_timeout=3600,
                               check=_usable, reset=_note_return)


class Backoff:
    """Reconnect delays: short first retries (50 ms, doubling) with full jitter, capped."""

    def __init__(self, cap: float, first: float = 0.05) -> None:
        self.cap = cap
        self.first = first
        self.n = 0

    def next(self) -> float:
        ceiling = min(self.cap, self.first * 2 ** self.n)
        self.n += 1
        return ceiling / 2 + random.random() * ceiling / 2

    def reset(self) -> None:
        self.n = 0


class Database:
    """The pool, and whether the database answered the last time it was asked (the
    ``/health`` answer)."""

    def __init__(self, pool: AsyncConnectionPool, reconnect_cap: float) -> None:
        self.pool = pool
        self.reconnect_cap = reconnect_cap
        self.healthy = True

    async def retrying(self, fn: Callable[[Any], Awaitable[T]],
                       attempts: int | None = None) -> T:
        """Run ``fn(conn)`` until the database takes it (it may be restarting): short
        first retries with jitter, capped well under the stale time; ``attempts``: give up
        (raise) after that many."""
        backoff = Backoff(self.reconnect_cap)
        while True:
            try:
                async with self.pool.connection() as conn:
                    return await fn(conn)
            except connections.LOST as exc:
                self.healthy = False
                if attempts is not None:
                    attempts -= 1
                    if attempts <= 0:
                        raise
                delay = backoff.next()
                log.warning("database write failed (%s); retrying in %.2fs",
                            first_line(exc), delay)
                await asyncio.sleep(delay)

    async def recover(self) -> None:
        """After a lost connection: test every idle pooled connection once (one query
        each) and drop the dead ones, so the next attempts get live ones."""
        try:
            await self.pool.check()
        except Exception:  # noqa: BLE001 - best effort; the next attempt tells
            log.debug("pool check failed", exc_info=True)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
