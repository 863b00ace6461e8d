"""The process's database connections: the pool (:mod:`jobs.db.pool`, sized for this node),
and :class:`Database`, which runs a write until the server takes it."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from portalq.jobs.db import connections
from portalq.jobs.db.pool import Pool
from portalq.jobs.db.pool import make_pool as _make_pool
from portalq.scheduler.config import Settings

log = logging.getLogger("portalq.worker")

T = TypeVar("T")


def make_pool(settings: Settings, dsn: str) -> Pool:
    """The process's connection pool (opened by the caller): :func:`jobs.db.pool.make_pool`
    sized for this node's workers."""
    return _make_pool(dsn, max_size=settings.workers + 4, options=settings.pool_options(),
                      reconnect_cap=settings.reconnect_cap_seconds)


class Backoff:
    """Reconnect delays: short first retries (50 ms, doubling) with full jitter, capped."""

    def __init__(self, cap: float, first: float = 0.05) -> None:
        self.cap = cap
        self.first = first
        self.n = 0

    def next(self) -> float:
        ceiling = min(self.cap, self.first * 2.0 ** self.n)   # a float power: int ** int is Any
        self.n += 1
        return ceiling / 2 + random.random() * ceiling / 2

    def reset(self) -> None:
        self.n = 0


class Database:
    """The pool, and whether the database answered the last time it was asked (the
    ``/health`` answer)."""

    def __init__(self, pool: Pool, reconnect_cap: float) -> None:
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
