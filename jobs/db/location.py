"""Where the database is: ``PORTALQ_DATABASE_URL``, else the embedded server.

URLs are SQLAlchemy-style (``postgresql+psycopg://...``); plain ``postgresql://`` works too.
Resolving one needs no SQLAlchemy: the worker process never imports it (memory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from psycopg import ProgrammingError
from psycopg.conninfo import make_conninfo

from portalq.jobs import settings
from portalq.jobs.db.embedded import EmbeddedPostgres
from portalq.jobs.db.schema_name import DEFAULT_SCHEMA as DEFAULT_SCHEMA  # re-exported
from portalq.jobs.db.schema_name import schema as schema  # re-exported
from portalq.jobs.errors import InputError

if TYPE_CHECKING:
    from sqlalchemy import Engine



def home() -> Path:
    value = settings.current(settings.FilesSettings).home
    if value is not None:
        return value.expanduser()
    # platformdirs only without PORTALQ_HOME: enqueue in a business's process needs neither
    from platformdirs import user_data_path

    return user_data_path("portalq", appauthor=False)


def embedded() -> EmbeddedPostgres:
    return EmbeddedPostgres(home())


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
    return settings.current(settings.DatabaseSettings).connect_timeout_seconds


def parse_url(url: str, what: str = "PORTALQ_DATABASE_URL") -> ParsedUrl:
    """Parse a database URL with :mod:`urllib.parse`; InputError (never quoting the
    password) when it is malformed. A '/', '?', '#' or '%' in the user name or password
    must be percent-encoded; '@' and ':' may appear as they are.

    Several hosts (failover, with ``target_session_attrs=read-write``) in any of the forms
    libpq and SQLAlchemy know -- ``postgresql://u@h1:5432,h2:5433/db``,
    ``?host=h1,h2&port=5432,5433`` or ``?host=h1:5432&host=h2:5433`` -- come back as one
    form, ``?host=h1,h2&port=5432,5433`` in the query, which libpq and SQLAlchemy both read."""
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
        query = tuple(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False))
    except ValueError:
        raise InputError(f"invalid {what}: bad query string") from None
    netloc_hosts = parts.netloc.rpartition("@")[2]
    if "," in netloc_hosts:
        host, port = None, None
        query = _multihost_query(netloc_hosts, query, what)
    else:
        try:
            port = parts.port
        except ValueError:
            raise InputError(f"invalid {what}: bad port (a number 1..65535){hint}") from None
        host = parts.hostname if parts.hostname else None
        if sum(k == "host" for k, _ in query) > 1 or any(
                k == "host" and "," in v for k, v in query):
            query = _multihost_query("", query, what)
    database = unquote(parts.path[1:]) if parts.path.startswith("/") and parts.path != "/" \
        else None
    if parts.path and not parts.path.startswith("/"):
        raise InputError(f"invalid {what}: not a URL{hint}")
    return ParsedUrl(user=unquote(parts.username) if parts.username is not None else None,
                 password=unquote(parts.password) if parts.password is not None else None,
                 host=host, port=port, database=database, query=query)


def _split_host_port(entry: str, what: str) -> tuple[str, str]:
    """``h``, ``h:5432``, ``[::1]:5432`` or a socket directory -> (host, port or "")."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise InputError(f"invalid {what}: bad host list entry")
        return host, rest[1:]
    if entry.startswith("/") or entry.count(":") != 1:
        return entry, ""   # a socket directory, a bare IPv6 address or a name
    host, _, port = entry.partition(":")
    return host, port


def _multihost_query(netloc_hosts: str, query: tuple[tuple[str, str], ...],
                     what: str) -> tuple[tuple[str, str], ...]:
    """The hosts of a multi-host URL as ``host=h1,h2`` and ``port=p1,p2`` (first in the
    query). Hosts in the query win over those in the netloc, as in libpq."""
    hosts = [v for k, v in query if k == "host"]
    port_values = [v for k, v in query if k == "port"]
    entries = ([e for h in hosts for e in h.split(",")] if hosts
               else unquote(netloc_hosts).split(","))
    pairs = [_split_host_port(e.strip(), what) for e in entries]
    if any(not h for h, _ in pairs):
        raise InputError(f"invalid {what}: an empty host in its host list")
    ports = [p for _, p in pairs]
    if port_values:
        if any(ports):
            raise InputError(f"invalid {what}: ports given both with the hosts and as port=")
        ports = [p.strip() for v in port_values for p in v.split(",")]
        if len(ports) not in (1, len(pairs)):
            raise InputError(f"invalid {what}: {len(ports)} ports for {len(pairs)} hosts")
    for p in ports:
        if p and not (p.isdigit() and 0 < int(p) < 65536):
            raise InputError(f"invalid {what}: bad port (a number 1..65535)")
    rest = tuple((k, v) for k, v in query if k not in ("host", "port"))
    out: tuple[tuple[str, str], ...] = (("host", ",".join(h for h, _ in pairs)),)
    if any(ports):
        out += (("port", ",".join(ports)),)
    return out + rest


def database_url(url: str | None = None, *, connect_timeout: float | None = None) -> str:
    """The SQLAlchemy URL to use, starting the embedded server when none is configured.
    It carries the connect timeout (``connect_timeout``) unless the URL sets its own."""
    # the setting: the variable, the config file or a file in PORTALQ_SECRETS_DIR
    url = url or settings.current(settings.DatabaseSettings).database_url
    if not url:
        url = embedded().ensure_running()
    parsed = parse_url(url)
    if not any(k == "connect_timeout" for k, _ in parsed.query):
        seconds = max(2, math.ceil(connect_timeout or connect_timeout_setting()))
        parsed = replace(parsed, query=(*parsed.query, ("connect_timeout", str(seconds))))
    out = parsed.sqlalchemy()
    libpq_dsn(out)  # unknown connection options: an input error now, not at connect time
    return out


def direct_database_url(url: str | None = None, direct: str | None = None, *,
                        connect_timeout: float | None = None) -> str:
    """The URL for what a transaction pooler (PgBouncer in transaction mode) cannot carry:
    LISTEN, the leader's session advisory lock, migrations. ``direct`` (or
    ``PORTALQ_DIRECT_DATABASE_URL``, or its secret file), else the main URL."""
    direct = direct or settings.current(settings.DatabaseSettings).direct_database_url
    return database_url(direct or url, connect_timeout=connect_timeout)


def behind_pooler(direct: str | None = None) -> bool:
    """A direct URL is configured: the main URL is then a transaction pooler."""
    return bool(direct or settings.current(settings.DatabaseSettings).direct_database_url)


def connect_options(direct: str | None = None) -> dict[str, Any]:
    """psycopg connection options for the main URL. Behind a pooler: no server-side
    prepared statements (psycopg prepares a statement run 5 times on a connection; with
    transaction pooling the next transaction may meet a server connection that never saw
    it -- PgBouncer < 1.21, or >= 1.21 without max_prepared_statements)."""
    return {"prepare_threshold": None} if behind_pooler(direct) else {}


def libpq_dsn(url: str) -> str:
    """The psycopg/libpq form (``key=value ...``) of a SQLAlchemy or PostgreSQL URL."""
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
    # alembic and SQLAlchemy only to migrate: the worker never loads them
    from sqlalchemy import create_engine

    return create_engine(database_url(url), pool_pre_ping=True, future=True,
                         connect_args=connect_options())
