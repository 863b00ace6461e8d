"""Which databases use a key file (issue 35): ``portalq keys retire`` deletes a key from the
key file, and every database sealing with that file may still need it -- ``portalq`` and
``portalq_demo`` share one by default. Retiring checks them all, not only the database it
was pointed at.

The record is a file next to the key file, ``<key file>.databases`` (mode 0600)::

    {"unrecorded": [key ids], "databases": {ident: {"name": ..., "dsn": ..., "seen": ...}}}

``ident`` is ``<system identifier>/<database name>``: the cluster's own id (from
``pg_control_system()``; where that is not granted, the server's host and port) and the
database's name. A database is recorded the first time portalq seals a value into it, or
migrates it, or runs a ``keys`` command on it -- before anything it seals can need a key.
``dsn`` is how portalq reached it (libpq's form, which never holds a password): ``retire``
connects there to re-wrap and count what it still has under the key, and refuses (one line
naming the database) when it cannot. A database dropped from a cluster portalq reaches is
dropped from the record; one that is gone for good elsewhere is forgotten with
``portalq keys forget-database``.

``unrecorded`` are the keys the file held before this record began (an older portalq):
a database never recorded may still need them, so retiring one needs the operator's word
(``--only-recorded``) that every database using the file has been recorded since.

The record lives beside the key file, not in it: processes re-read the key file whenever it
changes, and a new database must not make every one of them do so.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from portalq.jobs import clock
from portalq.jobs.db import sql
from portalq.jobs.db.location import connect_options
from portalq.jobs.errors import KeyError_
from portalq.jobs.secrets.key_providers import FileKeyring
from portalq.jobs.secrets.key_record import read, record_path, update

Entry = dict[str, Any]
log = logging.getLogger(__name__)


def identity(c: psycopg.Connection[Any]) -> tuple[str, str, list[str]]:
    """(ident, database name, the names of the cluster's databases) of ``c``'s database.
    Read-only and privilege-checked: safe inside a caller's transaction."""
    row = sql.fetch_one(c, "database_identity")
    assert row is not None
    cluster = row["sysid"] or f"{c.info.host}:{c.info.port}"
    return f"{cluster}/{row['name']}", row["name"], list(row["databases"])


def _forget_dropped(data: dict[str, Any], ident: str, databases: list[str]) -> bool:
    """Entries of the same cluster whose database no longer exists there: dropped, with
    their data (a dropped database needs no key)."""
    cluster = ident.rsplit("/", 1)[0]
    gone = [i for i in data["databases"]
            if i.rsplit("/", 1)[0] == cluster and i.rsplit("/", 1)[1] not in databases]
    for i in gone:
        del data["databases"][i]
    return bool(gone)


#: per key file provider, the databases this process has recorded (once each)
_NOTED: weakref.WeakKeyDictionary[FileKeyring, set[tuple[str, int, str]]] = (
    weakref.WeakKeyDictionary())


def note(c: psycopg.Connection[Any], p: Any, *, how: bool = True, strict: bool = False,
         ) -> None:
    """Record ``c``'s database as one using ``p``'s key file (a key file only: other
    providers keep their keys elsewhere), with how it was reached (``how``: also replacing
    the one recorded). Once per process and database; the query is read-only, so it may
    run inside the caller's transaction. A key file not made yet seals nothing: nothing to
    record. A record that cannot be written (a key file mounted read-only) or read (not
    JSON) is said once and not tried again: the values are sealed all the same (with
    ``strict``, for ``keys retire``, it is raised)."""
    if not isinstance(p, FileKeyring):
        return
    where = (c.info.host, c.info.port, c.info.dbname)
    seen = _NOTED.get(p)
    if seen is None:
        seen = _NOTED[p] = set()
    if where in seen or not p.path.exists():
        return
    ident, name, databases = identity(c)
    dsn = c.info.dsn

    def change(data: dict[str, Any]) -> bool:
        changed = _forget_dropped(data, ident, databases)
        entry = data["databases"].get(ident)
        if entry is None or (how and entry.get("dsn") != dsn):
            data["databases"][ident] = {"name": name, "dsn": dsn,
                                        "seen": clock.now().isoformat(timespec="seconds")}
            changed = True
        return changed
    try:
        update(p.path, change)
    except (OSError, KeyError_) as e:   # `keys retire` reads the record and refuses then
        if strict:
            raise
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        log.warning("cannot record database %s as one using %s (%s): `portalq keys retire` "
                    "will not know of it", name, p.path, why)
    seen.add(where)


def forget(key_file: Path, which: str) -> list[str]:
    """Drop the databases named ``which`` (an ident, or a database name) from the record;
    the idents dropped."""
    dropped: list[str] = []

    def change(data: dict[str, Any]) -> bool:
        for ident, entry in list(data["databases"].items()):
            if which in (ident, entry.get("name")):
                del data["databases"][ident]
                dropped.append(ident)
        return bool(dropped)
    update(key_file, change)
    for seen in _NOTED.values():
        seen.clear()
    return dropped


def others(c: psycopg.Connection[Any], p: FileKeyring) -> dict[str, Entry]:
    """The databases recorded for ``p``'s key file but ``c``'s (which is recorded now)."""
    try:
        note(c, p, strict=True)
        ident, _name, databases = identity(c)
        update(p.path, lambda data: _forget_dropped(data, ident, databases))
    except OSError as e:
        raise KeyError_(f"cannot update {record_path(p.path)}: "
                        f"{e.strerror or type(e).__name__}") from None
    return {i: e for i, e in read(p.path)["databases"].items() if i != ident}


def unrecorded(p: FileKeyring) -> list[str]:
    return list(read(p.path)["unrecorded"])


@contextmanager
def connect_dsn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection to a recorded database (committed on success)."""
    with psycopg.connect(dsn, **connect_options()) as conn:
        yield conn
