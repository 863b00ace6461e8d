"""Payloads from the business's orders: ``portalq enqueue file_entity --order ORD-1001``.

The business already holds the order; typing its payload again is how mistakes get filed.
A job type builds its payload from an order in one of two declared ways:

- a function on its declaration: ``JobType(..., order_source=lambda order_id: {...})`` (a
  plugin reads the business's database or API its own way);
- a query in the configuration, ``PORTALQ_ORDER_SQL_<JOB_TYPE>`` (e.g.
  ``PORTALQ_ORDER_SQL_FILE_ENTITY``), run read-only against portalq's database (where the
  business's own tables live, as enqueues are atomic with its writes) with the order id
  bound as ``%(order_id)s``. It returns one row: a single JSON object column is the payload;
  otherwise the columns are its top-level fields.

  The query is data from the environment, so it is held to reading: one ``SELECT`` (or
  ``WITH``/``VALUES``/``TABLE``) statement that binds ``%(order_id)s``, sent through the
  extended protocol (which refuses a second statement: ``SELECT ...; COMMIT; INSERT ...``
  cannot end the read-only transaction and write), in a ``READ ONLY`` transaction whose
  snapshot is taken before the query (so it cannot ``SET TRANSACTION READ WRITE``), with a
  statement timeout (``PORTALQ_ORDER_SQL_TIMEOUT`` seconds, default 10).

Either way the payload is validated like any other (jobs/types.py); ``--payload`` overrides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import dict_row

from portalq.jobs import limits, settings, types
from portalq.jobs.db.location import database_url, libpq_dsn
from portalq.jobs.errors import InputError

DEFAULT_TIMEOUT_S = 10
_READING = re.compile(r"\s*\(*\s*(SELECT|WITH|VALUES|TABLE)\b", re.IGNORECASE)


def sql_variable(job_type: str) -> str:
    return f"PORTALQ_ORDER_SQL_{job_type.upper()}"


def order_query(job_type: str) -> str:
    """The query of ``PORTALQ_ORDER_SQL_<JOB_TYPE>`` ("" when unset)."""
    return (settings.variable("PORTALQ_ORDER_SQL_", job_type.upper()) or "").strip()


def timeout_ms() -> int:
    """``PORTALQ_ORDER_SQL_TIMEOUT`` in milliseconds (seconds, 0.001 to 3600)."""
    return int(settings.current(settings.JobSettings).order_sql_timeout * 1000)


def _check_query(job_type: str, query: str) -> None:
    if not _READING.match(query):
        raise InputError(f"{sql_variable(job_type)} must be one SELECT statement (or WITH, "
                         "VALUES, TABLE)")
    if "%(order_id)s" not in query:
        raise InputError(f"{sql_variable(job_type)} must bind the order id as %(order_id)s")


def payload_for_order(job_type: str, order_id: str, dsn: str | None = None) -> dict[str, Any]:
    """The payload ``job_type``'s order source gives for ``order_id`` (InputError when
    there is no source, no such order, or the source fails)."""
    order_id = limits.check_identifier(order_id, "order id", limits.MAX_ORDER_ID)
    jt = types.get(job_type)
    if jt.order_source is not None:
        try:
            data = jt.order_source(order_id)
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - the plugin's failure, said in one line
            raise InputError(f"order source of {job_type} failed for {order_id!r}: "
                             f"{type(exc).__name__}: {exc}") from None
        if data is None:
            raise InputError(f"no order {order_id!r} in the order source of {job_type}")
        return _object(data, job_type)
    query = order_query(job_type)
    if not query:
        raise InputError(f"{job_type} has no order source: give --payload or --payload-file, "
                         f"declare order_source on the job type, or set "
                         f"{sql_variable(job_type)}")
    _check_query(job_type, query)
    return _from_sql(job_type, query, order_id, dsn)


def _from_sql(job_type: str, query: str, order_id: str, dsn: str | None) -> dict[str, Any]:

    limit = timeout_ms()
    try:
        with psycopg.connect(dsn or libpq_dsn(database_url())) as conn:
            conn.read_only = True      # a configured query reads; it never writes
            with conn.cursor(row_factory=dict_row) as cur:
                # first statement of the transaction: takes its snapshot, after which it
                # cannot be made read-write; the timeout ends with the transaction
                cur.execute("SELECT set_config('statement_timeout', %s, true)",
                            (str(limit),))
                # a pipeline always uses the extended protocol: one statement, whatever
                # the query holds (the simple protocol would run ``...; COMMIT; INSERT``)
                with conn.pipeline():
                    cur.execute(query, {"order_id": order_id})
                rows = cur.fetchmany(2)
            conn.rollback()
    except psycopg.errors.QueryCanceled:
        raise InputError(f"{sql_variable(job_type)} ran past its statement timeout "
                         f"({limit / 1000:g} s, PORTALQ_ORDER_SQL_TIMEOUT)") from None
    except psycopg.OperationalError:
        raise
    except psycopg.Error as exc:
        if "multiple commands" in str(exc):
            raise InputError(f"{sql_variable(job_type)} must be one statement: it holds "
                             "several") from None
        first = (str(exc).splitlines() or [""])[0]
        raise InputError(f"{sql_variable(job_type)} failed: {type(exc).__name__}: "
                         f"{first}") from None
    if not rows:
        raise InputError(f"no order {order_id!r} found by {sql_variable(job_type)}")
    if len(rows) > 1:
        raise InputError(f"{sql_variable(job_type)} returned more than one row for "
                         f"{order_id!r}")
    row = rows[0]
    if len(row) == 1 and isinstance(next(iter(row.values())), Mapping):
        return _object(next(iter(row.values())), job_type)
    return _object({k: v for k, v in row.items() if v is not None}, job_type)


def _object(data: Any, job_type: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise InputError(f"the order source of {job_type} gave {type(data).__name__}, "
                         "not a JSON object")
    return dict(data)
