"""Where the database is: ``PORTALQ_DATABASE_URL``, else the embedded server.

URLs are SQLAlchemy-style (``postgresql+psycopg://...``); plain ``postgresql://`` works too.
Resolving one needs no SQLAlchemy: the worker process never imports it (memory).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

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


def libpq_dsn(url: str) -> str:
    """The psycopg/libpq form of a SQLAlchemy URL."""
    _, rest = _split(url)
    return f"postgresql://{rest}"


@lru_cache(maxsize=8)
def engine(url: str | None = None) -> Engine:
    from sqlalchemy import create_engine

    return create_engine(database_url(url), pool_pre_ping=True, future=True)
