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
from portalq.jobs.worker_api import Capacity
from portalq.scheduler import calendar_cache
from tests import payloads

PORTAL = "irs_ein"
BC = "bc_corporate_online"


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
    """The portal's pause (by, probe) and the job types held for a changed page."""
    by, probe, held = conn.execute("SELECT paused_by, probe_at, drift_pauses FROM "
                                   "portalq.portals WHERE code = %s", (PORTAL,)).fetchone()
    return by, probe, sorted(held)


def _changed(dsn: str, job: dict[str, Any], escalate: bool) -> bool:
    return _run(dsn, lambda c: worker_api.finish_unsuccessful(
        c, job=job, worker="w", status="deferred", error="portal changed?", refund_attempt=True,
        escalation=(EscalationKind.PORTAL_CHANGED, "a page the flow does not know")
        if escalate else None))


def test_only_an_operator_resumes_a_portal_paused_for_a_changed_page(dsn, conn):
    first, second = _running(conn, 2)
    assert _run(dsn, lambda c: worker_api.pause_for_drift(
        c, portal=PORTAL, job_type="obtain_ein", reason="changed"))
    # a second job meeting the page: paused already, so it carries no escalation
    assert not _run(dsn, lambda c: worker_api.pause_for_drift(
        c, portal=PORTAL, job_type="obtain_ein", reason="x"))
    assert _changed(dsn, first, escalate=True)
    # a run that started before the pause succeeds (after an outage sign of another job,
    # which a success ends): it proves nothing about the page
    conn.execute("UPDATE portalq.portals SET outage_streak = 1 WHERE code = %s", (PORTAL,))
    assert _run(dsn, lambda c: worker_api.complete_many(c, worker="w", results=[
        (second["id"], {"ein": "12-3456789"})])) == {second["id"]}
    assert _portal(conn) == (None, None, ["obtain_ein"])
    [open_one] = console_repo.escalations_inbox(conn)
    assert (open_one["job_id"], open_one["kind"]) == (first["id"], "portal_changed")
    assert console_repo.needs_you(conn) == 1
    assert (queue.get_job(first["id"])["status"], queue.get_job(first["id"])["attempts"]) == (
        "deferred", 0)

    assert queue.resume_portal(PORTAL)
    assert _portal(conn) == (None, None, [])
    assert console_repo.escalations_inbox(conn) == [] and console_repo.needs_you(conn) == 0
    [closed] = console_repo.escalations_inbox(conn, include_resolved=True)
    assert closed["live"] is False

    # the page is still changed: the same job (its attempt refunded) meets it again, and
    # the person is told again
    conn.execute("UPDATE portalq.job_queue SET status = 'running', lock_owner = 'w', "
                 "attempts = 1 WHERE id = %s", (first["id"],))
    assert _run(dsn, lambda c: worker_api.pause_for_drift(
        c, portal=PORTAL, job_type="obtain_ein", reason="again"))
    assert _changed(dsn, dict(queue.get_job(first["id"])), escalate=True)
    kinds = conn.execute("SELECT kind, attempt FROM portalq.escalations WHERE job_id = %s "
                         "ORDER BY id", (first["id"],)).fetchall()
    assert kinds == [("portal_changed", 0), ("portal_changed", 1)]
    assert len(console_repo.escalations_inbox(conn)) == 1


def test_a_breaker_pause_stays_beside_a_held_job_type_an_operator_pause_stays(dsn, conn):
    queue.pause_portal(PORTAL, reason="IRS outage")   # an operator's pause
    assert not _run(dsn, lambda c: worker_api.pause_for_drift(
        c, portal=PORTAL, job_type="obtain_ein", reason="x"))
    assert _portal(conn) == ("operator", None, [])
    queue.resume_portal(PORTAL)
    conn.execute("UPDATE portalq.portals SET paused_at = now(), paused_by = 'breaker', "
                 "probe_at = now() WHERE code = %s", (PORTAL,))
    assert _run(dsn, lambda c: worker_api.pause_for_drift(
        c, portal=PORTAL, job_type="obtain_ein", reason="x"))
    # the outage's probe goes on (for the portal's other job types); this one waits for
    # a person, whatever the probe shows
    by, probe, held = _portal(conn)
    assert (by, held) == ("breaker", ["obtain_ein"]) and probe is not None


def _claim_bc(dsn: str) -> list[str]:
    rows = _run(dsn, lambda c: worker_api.claim(c, worker="w2", limit=10,
                                                capacities=[Capacity(BC, None)]))
    return sorted(r["job_type"] for r in rows)


def test_a_changed_page_holds_its_job_type_only_until_a_resume(dsn, conn):
    """A page obtain_ein's (here: file_entity's) flow does not know says nothing of the
    portal's other flows: only that job type waits; the portal's other job types are still
    claimed, the portal itself is not paused. A resume releases it."""
    search = queue.enqueue("name_search", "S1", payloads.NAME_SEARCH).id
    filing = queue.enqueue("file_entity", "F1", payloads.FILE_ENTITY_BC).id
    assert queue.get_job(filing)["portal"] == BC
    assert _run(dsn, lambda c: worker_api.pause_for_drift(
        c, portal=BC, job_type="file_entity", reason="changed"))
    # held already: a second job of that type meeting the page carries no escalation
    assert not _run(dsn, lambda c: worker_api.pause_for_drift(
        c, portal=BC, job_type="file_entity", reason="again"))
    assert conn.execute("SELECT paused_at FROM portalq.portals WHERE code = %s",
                        (BC,)).fetchone() == (None,)
    # what portals list and the console's portals page show: the held job type
    assert calendar_cache.load_sync(conn)[BC].held == ("file_entity",)
    assert _claim_bc(dsn) == ["name_search"]   # the other flow goes on
    assert queue.get_job(filing)["status"] == "pending"
    assert queue.get_job(search)["status"] == "running"

    assert queue.resume_portal(BC)
    assert calendar_cache.load_sync(conn)[BC].held == ()
    assert _claim_bc(dsn) == ["file_entity"]
