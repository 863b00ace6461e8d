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

Either way the payload is validated like any other (jobs/types.py); ``--payload`` overrides.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import dict_row

from portalq.jobs import limits, types
from portalq.jobs.errors import InputError


def sql_variable(job_type: str) -> str:
    return f"PORTALQ_ORDER_SQL_{job_type.upper()}"


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
    query = os.environ.get(sql_variable(job_type), "").strip()
    if not query:
        raise InputError(f"{job_type} has no order source: give --payload or --payload-file, "
                         f"declare order_source on the job type, or set "
                         f"{sql_variable(job_type)}")
    return _from_sql(job_type, query, order_id, dsn)


def _from_sql(job_type: str, query: str, order_id: str, dsn: str | None) -> dict[str, Any]:
    from portalq.jobs.database import database_url, libpq_dsn

    try:
        with psycopg.connect(dsn or libpq_dsn(database_url())) as conn:
            conn.read_only = True      # a configured query reads; it never writes
            with conn.cursor(row_factory=dict_row) as cur:
                cur.execute(query, {"order_id": order_id})
                rows = cur.fetchmany(2)
    except psycopg.OperationalError:
        raise
    except psycopg.Error as exc:
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
