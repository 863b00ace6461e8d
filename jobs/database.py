"""Where the database is: ``PORTALQ_DATABASE_URL``, else the embedded server.

URLs are SQLAlchemy-style (``postgresql+psycopg://...``); plain ``postgresql://`` works too.
Resolving one needs no SQLAlchemy: the worker process never imports it (memory).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Engine


def home() -> Path:
    value = os.environ.get("PORTALQ_HOME")
    if value:
        return Path(value).expanduser()
    from platformdirs import user_data_path

    return user_data_path("portalq", appauthor=False)


def embedded():  # type: ignore[no-untyped-def]
    from jobs.embedded import EmbeddedPostgres

    return EmbeddedPostgres(home())


def _split(url: str) -> tuple[str, str]:
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme:
        raise ValueError(f"not a database URL: {url!r}")
    return scheme, rest


def secret_file(name: str) -> str | None:
    """The value of setting ``name`` (e.g. ``database_url``) from a file in
    ``PORTALQ_SECRETS_DIR`` (Kubernetes/compose secrets mounted as files), if there is one.
    The file is named ``PORTALQ_<NAME>`` or ``portalq_<name>``; surrounding whitespace is
    dropped."""
    folder = os.environ.get("PORTALQ_SECRETS_DIR")
    if not folder:
        return None
    for candidate in (f"PORTALQ_{name.upper()}", f"portalq_{name.lower()}"):
        path = Path(folder) / candidate
        if path.is_file():
            return path.read_text().strip() or None
    return None


def database_url(url: str | None = None) -> str:
    """The SQLAlchemy URL to use, starting the embedded server when none is configured."""
    url = url or os.environ.get("PORTALQ_DATABASE_URL") or secret_file("database_url")
    if not url:
        return embedded().ensure_running()
    scheme, rest = _split(url)
    if scheme in ("postgresql", "postgres"):
        scheme = "postgresql+psycopg"
    return f"{scheme}://{rest}"


def direct_database_url(url: str | None = None, direct: str | None = None) -> str:
    """The URL for what a transaction pooler (PgBouncer in transaction mode) cannot carry:
    LISTEN, the leader's session advisory lock, migrations. ``direct`` (or
    ``PORTALQ_DIRECT_DATABASE_URL``, or its secret file), else the main URL."""
    direct = direct or os.environ.get("PORTALQ_DIRECT_DATABASE_URL") or secret_file(
        "direct_database_url")
    return database_url(direct) if direct else database_url(url)


def behind_pooler(direct: str | None = None) -> bool:
    """A direct URL is configured: the main URL is then a transaction pooler."""
    return bool(direct or os.environ.get("PORTALQ_DIRECT_DATABASE_URL")
                or secret_file("direct_database_url"))


def connect_options(direct: str | None = None) -> dict[str, Any]:
    """psycopg connection options for the main URL. Behind a pooler: no server-side
    prepared statements (psycopg prepares a statement run 5 times on a connection; with
    transaction pooling the next transaction may meet a server connection that never saw
    it -- PgBouncer < 1.21, or >= 1.21 without max_prepared_statements)."""
    return {"prepare_threshold": None} if behind_pooler(direct) else {}


def libpq_dsn(url: str) -> str:
    """The psycopg/libpq form of a SQLAlchemy URL."""
    _, rest = _split(url)
    return f"postgresql://{rest}"


@lru_cache(maxsize=8)
def engine(url: str | None = None) -> Engine:
    from sqlalchemy import create_engine

    return create_engine(database_url(url), pool_pre_ping=True, future=True,
                         connect_args=connect_options())
