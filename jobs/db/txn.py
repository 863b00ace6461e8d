"""The connection a queue call runs on: the caller's (a psycopg ``Connection``, a
SQLAlchemy ``Connection`` or ``Session``: the statement runs inside *its* transaction) or,
for ``None``, one of portalq's own, committed before the call returns."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from portalq.jobs.db.location import connect_options, database_url, libpq_dsn


def raw_connection(conn: Any) -> psycopg.Connection[Any]:
    """The psycopg connection behind a SQLAlchemy Session/Connection (same transaction)."""
    if isinstance(conn, psycopg.Connection):
        return conn
    if hasattr(conn, "connection") and callable(getattr(conn, "get_bind", None)):
        conn = conn.connection()  # Session -> its Connection (begins if needed)
    dbapi = getattr(conn, "connection", None)  # SQLAlchemy Connection -> pool proxy
    driver = getattr(dbapi, "driver_connection", None)
    if isinstance(driver, psycopg.Connection):
        return driver
    raise TypeError(f"not a psycopg/SQLAlchemy connection: {type(conn).__name__}")


@contextmanager
def connect(url: str | None = None) -> Iterator[psycopg.Connection[Any]]:
    """A connection of portalq's own; committed on success, rolled back on error."""
    with psycopg.connect(libpq_dsn(database_url(url)), **connect_options()) as conn:
        yield conn


@contextmanager
def use(conn: Any) -> Iterator[psycopg.Connection[Any]]:
    if conn is None:
        with connect() as own:
            yield own
    else:
        yield raw_connection(conn)
