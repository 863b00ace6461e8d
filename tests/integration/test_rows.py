"""The typed rows (jobs/rows.py) are the rows the repositories return: the same keys, and
statuses and kinds among their Literal words."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import get_args

import psycopg

from portalq.jobs import clock, queue, rows, worker_api
from portalq.jobs.kinds import EscalationKindName, JobStatusName, NoticeKindName
from portalq.jobs.operations import outbox
from portalq.jobs.operations import portal_rows as portals_repo
from portalq.jobs.worker_api import Capacity
from tests import payloads

T0 = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)  # a Tuesday: every seeded portal open


def keys(typed) -> set[str]:
    return set(typed.__required_keys__) | set(typed.__optional_keys__)


def test_job_list_claim_and_portal_rows_have_their_declared_keys(dsn, conn):
    clock.set_clock(clock.FrozenClock(T0))
    done = queue.enqueue("name_search", "ROW-1", payloads.NAME_SEARCH, run_at=T0)
    job = queue.get_job(done.id)
    assert set(job) == keys(rows.JobRow) and job["status"] in get_args(JobStatusName)
    detail = queue.show_job(done.id)
    assert set(detail) == keys(rows.JobDetail)
    listed = queue.list_jobs(order_id="ROW-1")
    assert [set(r) for r in listed] == [keys(rows.JobListRow)]

    async def claim() -> list[rows.ClaimRow]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await worker_api.claim(c, worker="w1", limit=1,
                                          capacities=[Capacity("bc_corporate_online", None)])

    claimed = asyncio.run(claim())
    assert [set(r) for r in claimed] == [keys(rows.ClaimRow)]
    assert claimed[0]["from_status"] in get_args(JobStatusName)

    portals = portals_repo.portals(conn)
    assert portals and all(set(p) == keys(rows.PortalRow) for p in portals)
    state = portals_repo.state(conn, portals[0]["code"])
    assert state is not None and set(state) == keys(rows.PortalState)


def test_outbox_rows_have_their_declared_keys(dsn, conn):
    clock.set_clock(clock.FrozenClock(T0))
    job = queue.enqueue("name_search", "ROW-2", payloads.NAME_SEARCH, run_at=T0)
    due = T0 - timedelta(minutes=1)
    conn.execute("INSERT INTO portalq.escalations (job_id, attempt, kind, reason, created_at, "
                 "next_try_at) VALUES (%s, 1, 'uncertain', 'x', %s, %s)", (job.id, due, due))
    conn.execute("INSERT INTO portalq.portal_notices (portal, kind, reason, created_at, next_try_at) "
                 "VALUES ('bc_corporate_online', 'paused', 'x', %s, %s)", (due, due))
    conn.commit()

    async def next_due() -> tuple[rows.EscalationRow | None, rows.NoticeRow | None]:
        async with await psycopg.AsyncConnection.connect(dsn) as c:
            return (await outbox.next_due(c, outbox.ESCALATIONS, skip=[]),
                    await outbox.next_due(c, outbox.NOTICES, skip=[]))

    escalation, notice = asyncio.run(next_due())
    assert escalation is not None and set(escalation) == keys(rows.EscalationRow)
    assert escalation["kind"] in get_args(EscalationKindName)
    assert notice is not None and set(notice) == keys(rows.NoticeRow)
    assert notice["kind"] in get_args(NoticeKindName)
