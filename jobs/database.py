"""Where the database is: ``PORTALQ_DATABASE_URL``, else the embedded server.

URLs are SQLAlchemy-style (``postgresql+psycopg://...``); plain ``postgresql://`` works too.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url


def home() -> Path:
    value = os.environ.get("PORTALQ_HOME")
    if value:
        return Path(value).expanduser()
    from platformdirs import user_data_path

    return user_data_path("portalq", appauthor=False)


def embedded():  # type: ignore[no-untyped-def]
    from jobs.embedded import EmbeddedPostgres

    return EmbeddedPostgres(home())


def database_url(url: str | None = None) -> str:
    """The SQLAlchemy URL to use, starting the embedded server when none is configured."""
    url = url or os.environ.get("PORTALQ_DATABASE_URL")
    if not url:
        return embedded().ensure_running()
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def libpq_dsn(url: str) -> str:
    """The psycopg/libpq form of a SQLAlchemy URL."""
    parsed = make_url(url).set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


@lru_cache(maxsize=8)
def engine(url: str | None = None) -> Engine:
    return create_engine(database_url(url), pool_pre_ping=True, future=True)
