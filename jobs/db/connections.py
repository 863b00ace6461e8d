"""The sessions the service holds itself, and what database errors mean: the service and
the console keep connections (a LISTEN session, the leader's session) but import no driver;
psycopg stays behind ``jobs/``.

- :data:`LOST`: what a lost, refused or dropped connection raises (retry, reconnect);
  :data:`DatabaseError`: anything the server or the client library raises.
- :func:`listening`: a session LISTENing on portalq's channels, and its notifications.
- :class:`LeaderSession`: the session whose advisory lock makes this node the leader.
- :func:`classify_error`: what a database error means to the one who asked (a CLI exit).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import psycopg

from portalq.jobs import worker_api
from portalq.jobs.kinds import SERVICE_CHANNELS, Channel

Connection = psycopg.AsyncConnection[Any]
Notification = psycopg.Notify

#: a lost, refused or dropped connection (the server restarting, a partition, a shutdown;
#: a statement that timed out: TimeoutError is an OSError)
LOST: tuple[type[BaseException], ...] = (psycopg.OperationalError, OSError)
#: anything the server or the client library raises
DatabaseError = psycopg.Error

#: what :func:`classify_error` says: the database is unreachable, it refused a value, or
#: another database error
ErrorKind = Literal["unavailable", "value", "other"]


def is_broken(conn: Connection) -> bool:
    """Is this connection unusable (closed, or lost mid-statement)?"""
    return bool(conn.closed or conn.broken)


def closed_error() -> Exception:
    """The error a connection found unusable raises (a pool's checkout check)."""
    return psycopg.OperationalError("connection closed")


@asynccontextmanager
async def listening(dsn: str, channels: Sequence[Channel] = SERVICE_CHANNELS
                    ) -> AsyncIterator[AsyncIterator[Notification]]:
    """A session of its own LISTENing on ``channels``; yields its notifications. Raises
    one of :data:`LOST` when the server goes away (the caller reconnects)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await worker_api.listen(conn, channels)
        yield conn.notifies()


class LeaderSession:
    """The leader's own session: it holds the advisory lock that elects one node for the
    periodic duties while it lives, with keepalives short enough that a leader cut off by
    a partition is noticed soon (another node takes over)."""

    def __init__(self, dsn: str, *, stale_after: float) -> None:
        self.dsn, self.stale_after = dsn, stale_after
        self._conn: Connection | None = None
        #: the last :meth:`lead` took the lock in a new session (this node just became
        #: the leader, or became it again after its session was lost)
        self.fresh = False

    @property
    def held(self) -> bool:
        """Did the last :meth:`lead` find this node the leader?"""
        return self._conn is not None

    async def lead(self) -> bool:
        """Is this node the leader? Keeps the lock if it holds it, else tries to take it
        (a session of its own); raises one of :data:`LOST` if the server is unreachable."""
        conn, self.fresh = self._conn, False
        if conn is not None and not conn.closed:
            try:
                await worker_api.ping(conn)
                return True
            except psycopg.Error:
                await conn.close()
        self._conn = None
        conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        await worker_api.leader_session(conn, stale_after=self.stale_after)
        if await worker_api.try_lead(conn):
            self._conn, self.fresh = conn, True
            return True
        await conn.close()
        return False

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None


def classify_error(exc: BaseException) -> tuple[ErrorKind, str] | None:
    """(kind, one-line message) for a database error, else None. SQLAlchemy's wrappers
    are unwrapped. The server's message text is shown only for connection failures (it
    names host and port, never the password); any other error is named by its class and
    SQLSTATE: its text may quote a value (a payload's SSN)."""
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is not None and isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None:
        exc = exc.orig
    if not isinstance(exc, psycopg.Error):
        return None
    if isinstance(exc, psycopg.OperationalError) and not isinstance(
            exc, psycopg.errors.ProgramLimitExceeded | psycopg.errors.QueryCanceled):
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        timeout_class = getattr(psycopg.errors, "ConnectionTimeout", ())
        if isinstance(exc, timeout_class) or "timeout expired" in first:
            first = ("no answer within the connect timeout "
                     f"(PORTALQ_CONNECT_TIMEOUT_SECONDS): {first}")
        return "unavailable", f"database unavailable: {first}"
    state = f"SQLSTATE {exc.sqlstate}" if exc.sqlstate else "refused by the client library"
    if isinstance(exc, psycopg.DataError | psycopg.IntegrityError
                  | psycopg.errors.ProgramLimitExceeded):
        return "value", f"the database refused a value ({type(exc).__name__}, {state})"
    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn):
        # a database portalq never migrated (the demo's is portalq_demo, not portalq) or
        # migrated by an older portalq: say what to do, not only the SQLSTATE
        return "other", (f"database{_name(exc)} has no portalq schema (or an older one): "
                         f"run `portalq migrate` ({type(exc).__name__}, {state})")
    return "other", f"database error ({type(exc).__name__}, {state})"


def _name(exc: psycopg.Error) -> str:
    """`` 'name'`` of the database an error came from, when the connection still says."""
    try:
        db = exc.pgconn.db.decode() if exc.pgconn is not None else ""
    except Exception:  # noqa: BLE001 - only a better message is at stake
        db = ""
    return f" {db!r}" if db else ""
