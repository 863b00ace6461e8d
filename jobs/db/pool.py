"""The process's connection pool: psycopg_pool's, with a checkout check that costs no round
trip for a connection in use a moment ago, and a reconnect backoff short enough that work
resumes soon after a PostgreSQL restart. The service opens it and hands its connections to
the queue's functions; the driver and the pool library stay behind ``jobs/``."""

from __future__ import annotations

import time
import weakref
from collections.abc import Mapping
from typing import Any

from psycopg_pool import AsyncConnectionPool, ConnectionPool, base, pool_async

from portalq.jobs.db import connections

Pool = AsyncConnectionPool

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
    doubles without bound (1, 2, 4, 8 s ...): work resumed seconds late after a
    PostgreSQL restart. Its attempts are objects of one class with tunable class constants; this
    gives the pool a subclass that starts at 50 ms and never waits longer than ``cap``."""
    class CappedAttempt(base.AttemptWithBackoff):
        INITIAL_DELAY = 0.05
        DELAY_JITTER = 0.5

        def update_delay(self, now: float) -> None:
            super().update_delay(now)
            self.delay = min(self.delay, cap)

    if getattr(pool_async, "AttemptWithBackoff", None) is base.AttemptWithBackoff:
        pool_async.AttemptWithBackoff = CappedAttempt  # type: ignore[attr-defined]


def make_pool(dsn: str, *, max_size: int, options: Mapping[str, Any],
              reconnect_cap: float) -> Pool:
    """The process's connection pool, autocommit (opened by the caller); ``options``:
    the connections' own (timeouts, keepalives)."""
    _cap_pool_reconnects(reconnect_cap)
    return AsyncConnectionPool(dsn, min_size=2, max_size=max_size, open=False,
                               kwargs={"autocommit": True, **options},
                               reconnect_timeout=3600, check=_usable, reset=_note_return)


def make_sync_pool(dsn: str, *, max_size: int = 8) -> ConnectionPool:
    """A thread-safe (blocking) pool for the console's request threads: autocommit, no
    prepared statements (it may run behind PgBouncer); opened by the caller."""
    return ConnectionPool(dsn, min_size=1, max_size=max_size, open=False,
                          kwargs={"autocommit": True, "prepare_threshold": None})
