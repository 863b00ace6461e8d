"""Where the database is: ``PORTALQ_DATABASE_URL``, else the embedded server.

URLs are SQLAlchemy-style (``postgresql+psycopg://...``); plain ``postgresql://`` works too.
Resolving one needs no SQLAlchemy: the worker process never imports it (memory).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from jobs.errors import InputError

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


DEFAULT_CONNECT_TIMEOUT = 10.0
_SCHEMES = {"postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg",
            "postgresql+psycopg": "postgresql+psycopg"}


@dataclass(frozen=True)
class ParsedUrl:
    """A parsed database URL (user and password percent-decoded)."""

    user: str | None
    password: str | None
    host: str | None
    port: int | None
    database: str | None
    query: tuple[tuple[str, str], ...]

    def redacted(self) -> str:
        """For messages: the URL without its password."""
        auth = ""
        if self.user is not None or self.password is not None:
            auth = quote(self.user or "", safe="") + (":***" if self.password else "") + "@"
        return self._render(auth)

    def sqlalchemy(self) -> str:
        """The SQLAlchemy form; every part percent-encoded, so any character round-trips."""
        auth = ""
        if self.user is not None or self.password is not None:
            auth = quote(self.user or "", safe="")
            if self.password is not None:
                auth += ":" + quote(self.password, safe="")
            auth += "@"
        return self._render(auth)

    def _render(self, auth: str) -> str:
        host = self.host or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{self.port}" if self.port is not None else ""
        db = "/" + quote(self.database, safe="") if self.database is not None else ""
        query = ("?" + urlencode(self.query)) if self.query else ""
        return f"postgresql+psycopg://{auth}{host}{port}{db}{query}"


def connect_timeout_setting() -> float:
    """``PORTALQ_CONNECT_TIMEOUT_SECONDS`` (default 10): the longest any database connection
    may take to open. libpq counts whole seconds, at least 2."""
    raw = os.environ.get("PORTALQ_CONNECT_TIMEOUT_SECONDS", "").strip()
    if not raw:
        return DEFAULT_CONNECT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= 3600:
        raise InputError("PORTALQ_CONNECT_TIMEOUT_SECONDS must be a number of seconds in "
                         f"(0, 3600], got {raw!r}")
    return value


def parse_url(url: str, what: str = "PORTALQ_DATABASE_URL") -> ParsedUrl:
    """Parse a database URL with :mod:`urllib.parse`; InputError (never quoting the
    password) when it is malformed. A '/', '?', '#' or '%' in the user name or password
    must be percent-encoded; '@' and ':' may appear as they are."""
    hint = " (percent-encode '/', '?', '#' and '%' in the user name or password)"
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in _SCHEMES:
        raise InputError(f"invalid {what}: it must start with postgresql:// "
                         "(or postgresql+psycopg://)")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise InputError(f"invalid {what}: not a URL{hint}") from None
    if parts.fragment or url.endswith("#"):
        raise InputError(f"invalid {what}: a '#' ends the URL{hint}")
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"invalid {what}: bad port (a number 1..65535){hint}") from None
    try:
        query = tuple(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False))
    except ValueError:
        raise InputError(f"invalid {what}: bad query string") from None
    database = unquote(parts.path[1:]) if parts.path.startswith("/") and parts.path != "/" \
        else None
    if parts.path and not parts.path.startswith("/"):
        raise InputError(f"invalid {what}: not a URL{hint}")
    return ParsedUrl(user=unquote(parts.username) if parts.username is not None else None,
                 password=unquote(parts.password) if parts.password is not None else None,
                 host=parts.hostname if parts.hostname else None, port=port,
                 database=database, query=query)


def database_url(url: str | None = None, *, connect_timeout: float | None = None) -> str:
    """The SQLAlchemy URL to use, starting the embedded server when none is configured.
    It carries the connect timeout (``connect_timeout``) unless the URL sets its own."""
    url = url or os.environ.get("PORTALQ_DATABASE_URL")
    if not url:
        url = embedded().ensure_running()
    parsed = parse_url(url)
    if not any(k == "connect_timeout" for k, _ in parsed.query):
        seconds = max(2, math.ceil(connect_timeout or connect_timeout_setting()))
        parsed = replace(parsed, query=(*parsed.query, ("connect_timeout", str(seconds))))
    out = parsed.sqlalchemy()
    libpq_dsn(out)  # unknown connection options: an input error now, not at connect time
    return out


def libpq_dsn(url: str) -> str:
    """The psycopg/libpq form (``key=value ...``) of a SQLAlchemy or PostgreSQL URL."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import make_conninfo

    parsed = parse_url(url)
    params: dict[str, Any] = {"host": parsed.host, "port": parsed.port, "user": parsed.user,
                              "password": parsed.password, "dbname": parsed.database}
    params = {k: v for k, v in params.items() if v is not None}
    params.update(dict(parsed.query))
    try:
        return make_conninfo("", **params)
    except ProgrammingError:
        bad = sorted(k for k, _ in parsed.query)
        raise InputError("invalid PORTALQ_DATABASE_URL: unknown or bad connection option "
                         f"among {', '.join(bad) or 'its parts'}") from None


@lru_cache(maxsize=8)
def engine(url: str | None = None) -> Engine:
    from sqlalchemy import create_engine

    return create_engine(database_url(url), pool_pre_ping=True, future=True)
