"""The one home of portalq's SQL: named statements from ``queries.sql``, and the only
functions that execute them (sync psycopg connections and async ones alike)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache, lru_cache
from importlib import resources
from itertools import islice
from typing import Any

from psycopg import AsyncConnection, Connection, Copy, Cursor
from psycopg.copy import FileWriter, LibpqWriter
from psycopg.pq import ExecStatus
from psycopg.rows import dict_row
from psycopg.types.json import set_json_dumps
from psycopg.types.string import BytesBinaryDumper

from portalq.jobs.db.location import DEFAULT_SCHEMA, schema

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


def copy_columns(name: str) -> tuple[str, ...]:
    """The columns the named ``COPY table (a, b, ...) FROM STDIN`` lists, in its order."""
    found = re.match(r"COPY\s+\S+\s*\(([^)]*)\)\s+FROM\s+STDIN", query(name), flags=re.I)
    if found is None:
        raise ValueError(f"{name} is not a COPY of named columns FROM STDIN")
    return tuple(c.strip() for c in found.group(1).split(","))


def copy_in(conn: Connection[Any], name: str, types: Sequence[str],
            rows: Iterable[Sequence[Any]], *, json_text: bool = False, block: int = 0,
            ) -> None:
    """Run the named ``COPY ... FROM STDIN (FORMAT BINARY)`` with ``rows`` (column types
    ``types``). ``json_text``: json/jsonb values are already JSON text (sent as is).
    ``block``: send the rows in blocks of about this many bytes (0: psycopg's own size);
    each block is flushed to the server as soon as it is made."""
    with conn.cursor() as cur:
        if json_text:
            set_json_dumps(_as_is, context=cur)
        if "bytea" in types:
            # bytea by its oid is psycopg's DB-API Binary-aware dumper, two Python calls per
            # value; bytes need none: this is its C dumper (psycopg's optimised twin)
            cur.adapters.register_dumper(bytes, BytesBinaryDumper)
        oids = [cur.adapters.types[t].oid for t in types]
        # flush_threshold=0: each block goes to the server as it is made (psycopg's default
        # waits for a MiB), so the server stores the first rows while the later ones are made
        with cur.copy(query(name), writer=LibpqWriter(cur, flush_threshold=0)) as copy:
            if not block:
                copy.set_types(oids)
                for row in rows:
                    copy.write_row(row)
                return
            header, trailer = _binary_frame(cur)
            written = False
            for data in _encoded_blocks(cur, oids, iter(rows), block, header, trailer):
                copy.write(header + data if not written else data)
                written = True
            if written:   # rows written as blocks: the format's end marker is ours to send
                copy.write(trailer)


def _encoded_blocks(cur: Cursor[Any], oids: Sequence[int], rows: Iterator[Sequence[Any]],
                    block: int, header: bytes, trailer: bytes) -> Iterator[bytes]:
    """``rows`` in the binary COPY format without its header and end marker, in pieces of
    about ``block`` bytes. Each piece is encoded by psycopg itself, a :class:`psycopg.Copy`
    written to memory (its public way to make COPY data without sending it); the rows a
    piece takes follow the mean row size seen so far."""
    per, made_rows, made_bytes = 8, 0, 0
    while True:
        out = io.BytesIO()
        with Copy(cur, binary=True, writer=FileWriter(out)) as enc:
            enc.set_types(oids)
            n = 0
            for row in islice(rows, per):
                enc.write_row(row)
                n += 1
        if not n:
            return
        data = out.getvalue()
        body = data[len(header):len(data) - len(trailer)]
        made_rows += n
        made_bytes += len(body)
        per = max(1, block * made_rows // made_bytes)
        yield body


def _binary_frame(cur: Cursor[Any]) -> tuple[bytes, bytes]:
    """The binary COPY format's header and end marker, as psycopg writes them around no
    rows."""
    out = io.BytesIO()
    with Copy(cur, binary=True, writer=FileWriter(out)):
        pass
    data = out.getvalue()
    return data[:-2], data[-2:]


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
