"""Jobs brought to the events "waiting on the portal" and "decided" (issue 36) the way the
service brings them there: a flow's waiting marker saved and its :class:`WaitOnPortal`
turned into a deferral by the outcome policy; an approval pending at its review page; an
uncertain filing failed in doubt. For the NOTIFY and webhook tests."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import psycopg

from portalq.jobs import clock, waiting, worker_api
from portalq.jobs.worker_api import Capacity
from portalq.scheduler import outcomes
from tests.checkpoints import in_doubt

RULE = waiting.LookupRule(
    portal="email", says="the registry queues filings", not_found_conclusive_after=None,
    lost_answer_window=timedelta(hours=4), check_every=timedelta(minutes=10), backoff=2.0,
    check_cap=timedelta(hours=1), expected_within=timedelta(hours=2))


def check_portal(dsn: str, job_id: int) -> dict[str, Any]:
    """One check of a job (due now) that finds the portal undecided: claimed, its marker
    saved, deferred to its next check as the service does. The marker, as saved."""
    async def go() -> dict[str, Any]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            [job] = [j for j in await worker_api.claim(
                c, worker="w1", limit=50, capacities=[Capacity("email", None)])
                if j["id"] == job_id]
            mark = waiting.waiting(job["checkpoint"], RULE, since=clock.now(), now=clock.now(),
                                   what="the registry to decide")
            if waiting.marker(job["checkpoint"]):   # the wait goes on: since it began
                mark["since"] = job["checkpoint"]["waiting"]["since"]
            await worker_api.save_checkpoint(c, job_id=job_id, worker="w1",
                                             data={waiting.KEY: mark})
            exc = waiting.wait(mark)
            t = outcomes.decide(exc, job, message=str(exc), now=clock.now(),
                                portal=outcomes.PortalState(), policy=outcomes.Policy())
            assert await worker_api.finish_unsuccessful(
                c, job=job, worker="w1", status=t.status, error=t.error, run_at=t.run_at,
                refund_attempt=t.refund_attempt, detail=t.detail)
            return mark
    return asyncio.run(go())


def awaiting_approval(dsn: str, job_id: int) -> None:
    """The job stopped at its review page: deferred, its approval pending."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("UPDATE portalq.job_queue SET status = 'deferred', attempts = 1, "
                  "run_at = %s, checkpoint = %s WHERE id = %s",
                  (clock.now() + timedelta(days=7),
                   json.dumps({"approval": {"state": "pending", "digest": "9f2c" + "0" * 60}}),
                   job_id))


def failed_in_doubt(dsn: str, job_id: int) -> None:
    """The job failed after pressing submit, its answer lost: filed or not, a person says."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 1, "
                  "finished_at = %s, checkpoint = %s, last_error = 'uncertain' WHERE id = %s",
                  (clock.now(), json.dumps(in_doubt()), job_id))


def saved_then_lost(dsn: str, job_id: int) -> None:
    """A first check that saved its marker and then lost its worker before deferring (the
    service stopped): the job back in the queue, its marker saying one check was made."""
    async def go() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            [job] = [j for j in await worker_api.claim(
                c, worker="w1", limit=50, capacities=[Capacity("email", None)])
                if j["id"] == job_id]
            mark = waiting.waiting(job["checkpoint"], RULE, since=clock.now(), now=clock.now(),
                                   what="the registry to decide")
            await worker_api.save_checkpoint(c, job_id=job_id, worker="w1",
                                             data={waiting.KEY: mark})
            assert await worker_api.release(c, worker="w1", ids=[job_id]) == {job_id}
    asyncio.run(go())
