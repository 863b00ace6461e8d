"""The one home of portalq's SQL: named statements from ``queries.sql``, and the only
functions that execute them (sync psycopg connections and async ones alike)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import psycopg._copy_base
from psycopg import AsyncConnection, Connection
from psycopg.copy import LibpqWriter
from psycopg.pq import ExecStatus
from psycopg.rows import dict_row
from psycopg.types.json import set_json_dumps
from psycopg.types.string import BytesBinaryDumper

from portalq.jobs.database import DEFAULT_SCHEMA, schema

_QUALIFIER = re.compile(r"(?<![\w.])portalq\.(?=\w)")


@cache
def _parsed() -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """``queries.sql`` read once: each statement's text (comments left out), and the
    parameters its header names on a ``-- inline: a, b`` line (see :func:`statement`)."""
    text = resources.files(__package__).joinpath("queries.sql").read_text()
    # every object is named with its schema (the statements also run on the business's own
    # connections, whose search_path is theirs): ``portalq.`` in the file, another schema's
    # name when PORTALQ_SCHEMA says so
    target = schema()
    if target != DEFAULT_SCHEMA:
        text = _QUALIFIER.sub(f"{target}.", text)
    parts = re.split(r"^-- name: (\w+)\s*$", text, flags=re.M)
    out: dict[str, str] = {}
    inlined: dict[str, tuple[str, ...]] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
        out[name] = "\n".join(lines).rstrip().rstrip(";")
        found = re.search(r"^-- inline: ([\w, ]+)$", body, flags=re.M)
        if found:
            inlined[name] = tuple(p.strip() for p in found.group(1).split(","))
    return out, inlined


def query(name: str) -> str:
    return _parsed()[0][name]


def statement(name: str, params: Mapping[str, Any] | None = None) -> str:
    """The text sent for ``name`` with ``params``: :func:`query`, with the parameters its
    header names ``-- inline:`` written in as integer literals. A prepared statement's
    generic plan sees those values (a LIMIT), so the server can keep one plan instead of
    planning each run anew; one text per value, so few values only."""
    inline = _parsed()[1].get(name)
    if not inline:
        return query(name)
    values = tuple((params or {})[k] for k in inline)
    for k, v in zip(inline, values, strict=True):
        if type(v) is not int:
            raise TypeError(f"{name}: {k} is written into the statement, so it must be an "
                            f"int, not {type(v).__name__}")
    return _with_literals(name, inline, values)


@lru_cache(maxsize=512)
def _with_literals(name: str, keys: tuple[str, ...], values: tuple[int, ...]) -> str:
    text = query(name)
    for k, v in zip(keys, values, strict=True):
        text = text.replace(f"%({k})s", str(v))
    return text


def fetch(conn: Connection[Any], name: str, params: dict[str, Any] | None = None,
          ) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(statement(name, params), params or {})
        return cur.fetchall() if _returns_rows(cur) else []


def fetch_one(conn: Connection[Any], name: str, params: dict[str, Any] | None = None,
              ) -> dict[str, Any] | None:
    rows = fetch(conn, name, params)
    return rows[0] if rows else None


def fetch_value(conn: Connection[Any], name: str, params: dict[str, Any] | None = None,
                ) -> Any:
    """The first column of the first row (None if no row)."""
    with conn.cursor() as cur:
        cur.execute(statement(name, params), params or {})
        row = cur.fetchone()
        return None if row is None else row[0]


#: the size of the blocks a COPY's rows are sent in (psycopg's is 32 KiB, about 250 jobs).
#: The server stores a block while the client makes the next, so what it still has to store
#: after the client's last row, before the commit, is one block: at 32 KiB that tail was
#: 2.3-2.6 ms of a 1,000-job batch's ~10 ms, at 4 KiB 0.9-1.2 ms (issue 19: batches of
#: 1,000, 64,094 -> 70,904 jobs/s interleaved; test_enqueue.py::
#: test_a_large_batch_reaches_the_server_in_small_blocks). psycopg has no setting for it, so
#: its module constant is set; that test fails if a psycopg release stops reading it.
COPY_BLOCK = 4096
psycopg._copy_base.BUFFER_SIZE = COPY_BLOCK


def copy_in(conn: Connection[Any], name: str, types: Sequence[str],
            rows: Iterable[Sequence[Any]], *, json_text: bool = False) -> None:
    """Run the named ``COPY ... FROM STDIN (FORMAT BINARY)`` with ``rows`` (column types
    ``types``). ``json_text``: json/jsonb values are already JSON text (sent as is)."""
    with conn.cursor() as cur:
        if json_text:
            set_json_dumps(_as_is, context=cur)
        if "bytea" in types:
            # bytea by its oid is psycopg's DB-API Binary-aware dumper, two Python calls per
            # value; bytes need none: this is its C dumper (psycopg's optimised twin)
            cur.adapters.register_dumper(bytes, BytesBinaryDumper)
        # each block flushed to the server as it is made (not every MiB, psycopg's default):
        # the server stores the first rows while the later ones are still being made
        with cur.copy(query(name), writer=LibpqWriter(cur, flush_threshold=0)) as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)


def _as_is(text: str) -> str:
    return text


async def afetch(conn: AsyncConnection[Any], name: str, params: dict[str, Any] | None = None,
                 *, prepare: bool | None = None) -> list[dict[str, Any]]:
    """``prepare=False``: never a server-side prepared statement, so every run is planned
    for its parameters (for statements whose generic plan would be poor)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(statement(name, params), params or {}, prepare=prepare)
        return await cur.fetchall() if _returns_rows(cur) else []


def _returns_rows(cur: Any) -> bool:
    """Whether the statement returned rows (possibly none). Not ``cur.description``: that
    builds a Column object per column, 18 of them for a claim, on every call (issue 19)."""
    res = cur.pgresult
    return res is not None and res.status in (ExecStatus.TUPLES_OK, ExecStatus.SINGLE_TUPLE)


async def afetch_one(conn: AsyncConnection[Any], name: str,
                     params: dict[str, Any] | None = None, *, prepare: bool | None = None,
                     ) -> dict[str, Any] | None:
    rows = await afetch(conn, name, params, prepare=prepare)
    return rows[0] if rows else None
