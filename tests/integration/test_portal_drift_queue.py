"""A portal paused for a changed page (issue 37), in the queue: only an operator resumes it
(not a success of a run that started before the pause, not the breaker), a repeat after a
resume is escalated again, and the console's inbox shows its escalation while it holds."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from portalq.jobs import queue, worker_api
from portalq.jobs.admin import reads as console_repo
from portalq.jobs.kinds import EscalationKind
from tests import payloads

PORTAL = "irs_ein"


def _run(dsn: str, fn: Any) -> Any:
    async def go() -> Any:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await fn(c)
    return asyncio.run(go())


def _running(conn: psycopg.Connection, n: int) -> list[dict[str, Any]]:
    """``n`` IRS jobs claimed by worker "w" (their first attempt under way)."""
    ids = [queue.enqueue("obtain_ein", f"O{i}", payloads.OBTAIN_EIN).id for i in range(n)]
    conn.execute("UPDATE portalq.job_queue SET status = 'running', lock_owner = 'w', attempts = 1,"
                 " started_at = now(), heartbeat_at = now() WHERE id = ANY(%s)", (ids,))
    return [dict(queue.get_job(i)) for i in ids]


def _portal(conn: psycopg.Connection) -> tuple[Any, ...]:
    return conn.execute("SELECT paused_by, probe_at FROM portalq.portals WHERE code = %s",
                        (PORTAL,)).fetchone()


def _changed(dsn: str, job: dict[str, Any], escalate: bool) -> bool:
    return _run(dsn, lambda c: worker_api.finish_unsuccessful(
        c, job=job, worker="w", status="deferred", error="portal changed?", refund_attempt=True,
        escalation=(EscalationKind.PORTAL_CHANGED, "a page the flow does not know")
        if escalate else None))


def test_only_an_operator_resumes_a_portal_paused_for_a_changed_page(dsn, conn):
    first, second = _running(conn, 2)
    assert _run(dsn, lambda c: worker_api.pause_for_drift(c, portal=PORTAL, reason="changed"))
    # a second job meeting the page: paused already, so it carries no escalation
    assert not _run(dsn, lambda c: worker_api.pause_for_drift(c, portal=PORTAL, reason="x"))
    assert _changed(dsn, first, escalate=True)
    # a run that started before the pause succeeds (after an outage sign of another job,
    # which a success ends): it proves nothing about the page
    conn.execute("UPDATE portalq.portals SET outage_streak = 1 WHERE code = %s", (PORTAL,))
    assert _run(dsn, lambda c: worker_api.complete_many(c, worker="w", results=[
        (second["id"], {"ein": "12-3456789"})])) == {second["id"]}
    assert _portal(conn) == ("drift", None)
    [open_one] = console_repo.escalations_inbox(conn)
    assert (open_one["job_id"], open_one["kind"]) == (first["id"], "portal_changed")
    assert console_repo.needs_you(conn) == 1
    assert (queue.get_job(first["id"])["status"], queue.get_job(first["id"])["attempts"]) == (
        "deferred", 0)

    assert queue.resume_portal(PORTAL)
    assert _portal(conn) == (None, None)
    assert console_repo.escalations_inbox(conn) == [] and console_repo.needs_you(conn) == 0
    [closed] = console_repo.escalations_inbox(conn, include_resolved=True)
    assert closed["live"] is False

    # the page is still changed: the same job (its attempt refunded) meets it again, and
    # the person is told again
    conn.execute("UPDATE portalq.job_queue SET status = 'running', lock_owner = 'w', "
                 "attempts = 1 WHERE id = %s", (first["id"],))
    assert _run(dsn, lambda c: worker_api.pause_for_drift(c, portal=PORTAL, reason="again"))
    assert _changed(dsn, dict(queue.get_job(first["id"])), escalate=True)
    kinds = conn.execute("SELECT kind, attempt FROM portalq.escalations WHERE job_id = %s "
                         "ORDER BY id", (first["id"],)).fetchall()
    assert kinds == [("portal_changed", 0), ("portal_changed", 1)]
    assert len(console_repo.escalations_inbox(conn)) == 1


def test_a_breaker_pause_becomes_a_drift_pause_an_operator_pause_stays(dsn, conn):
    queue.pause_portal(PORTAL, reason="IRS outage")   # an operator's pause
    assert not _run(dsn, lambda c: worker_api.pause_for_drift(c, portal=PORTAL, reason="x"))
    assert _portal(conn) == ("operator", None)
    queue.resume_portal(PORTAL)
    conn.execute("UPDATE portalq.portals SET paused_at = now(), paused_by = 'breaker', "
                 "probe_at = now() WHERE code = %s", (PORTAL,))
    assert _run(dsn, lambda c: worker_api.pause_for_drift(c, portal=PORTAL, reason="x"))
    assert _portal(conn) == ("drift", None)   # no probe: it waits for a person
