"""Results back to the business's application (issue 36): what became of an order.

``order("ORD-1001")`` (``portalq orders show ORD-1001``) gives every job of the order: its
status, its result (the flow's output: an EIN, a confirmation number) and its timeline (the
job's transitions, and what a person was asked or told about it). Nothing secret: no
payload at all, and every other text scrubbed of the job's secret values and of anything
shaped like an SSN (:func:`jobs.secrets.redaction.public_job`, as the console shows a job).

To hear of a result as it happens instead of asking, LISTEN on ``portalq_job_status``
(migration 0021).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from portalq.jobs import limits
from portalq.jobs.db import sql
from portalq.jobs.db.txn import use
from portalq.jobs.errors import JobNotFound
from portalq.jobs.queue import get_job
from portalq.jobs.secrets import redaction

#: the columns of a job shown to the application (never the payload or its seals)
FIELDS = ("id", "job_type", "order_id", "portal", "status", "attempts", "max_attempts",
          "result", "last_error", "created_at", "finished_at", "events", "escalations")
#: what an escalation shows: what a person was asked or told, and when it was settled
ESCALATION_FIELDS = ("kind", "reason", "created_at", "resolved_at")


class OrderResult(TypedDict):
    order_id: str
    jobs: list[dict[str, Any]]


def _view(conn: Any, job: dict[str, Any]) -> dict[str, Any]:
    full = {**job,
            "events": sql.fetch(conn, "job_events", {"id": job["id"]}),
            "escalations": [{k: e[k] for k in ESCALATION_FIELDS} for e in
                            sql.fetch(conn, "console_job_escalations", {"job_id": job["id"]})]}
    public = redaction.public_job(full)   # secrets scrubbed from every text of the job
    return {k: public[k] for k in FIELDS}


def order(order_id: str, conn: Any = None) -> OrderResult:
    """Every job of ``order_id``, oldest first, fit to show (:class:`JobNotFound` if none).
    ``conn``: as for :func:`jobs.queue.get_job` (the caller's transaction, or portalq's)."""
    order_id = limits.check_identifier(order_id, "order id", limits.MAX_ORDER_ID)
    with use(conn) as c:
        jobs = sql.fetch(c, "order_jobs", {"order_id": order_id})
        if not jobs:
            raise JobNotFound(f"no jobs for order {order_id!r}")
        return OrderResult(order_id=order_id, jobs=[_view(c, j) for j in jobs])


#: the orders the console's list shows at most (blocked, at risk and open ones first)
ORDERS_SHOWN = 200


def orders(at_risk: Sequence[str] = (), conn: Any = None, limit: int = ORDERS_SHOWN,
           ) -> list[dict[str, Any]]:
    """The orders (of a declared kind), each with its steps' counts and the steps that
    failed: blocked ones first (a step failed: the steps after it wait on a person), then
    the ``at_risk`` ones (the estimator's deadline warnings), then the open ones, newest
    first. Nothing secret: no input, no payload, no error text."""
    with use(conn) as c:
        return [dict(r) for r in sql.fetch(c, "orders_list", {"at_risk": list(at_risk),
                                                             "limit": limit})]


def order_record(order_id: str, conn: Any = None) -> dict[str, Any] | None:
    """The order of a declared kind ``order_id`` (its kind, creation, cancellation), or
    None: its jobs were enqueued one by one, with no pipeline."""
    order_id = limits.check_identifier(order_id, "order id", limits.MAX_ORDER_ID)
    with use(conn) as c:
        row = sql.fetch_one(c, "order_get", {"order_id": order_id})
        return dict(row) if row is not None else None


def result(job_id: int, conn: Any = None) -> dict[str, Any]:
    """One job's status, result and timeline, fit to show (:class:`JobNotFound` if none)."""
    with use(conn) as c:
        return _view(c, dict(get_job(job_id, c)))
