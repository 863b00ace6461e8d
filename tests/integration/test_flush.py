"""Completions while the queue is busy: several claims' worth written by one statement, and
nothing held once the queue goes quiet or the worker stops (the worker's flush loop, an
in-process worker on the real server)."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from pydantic import BaseModel

from portalq.jobs import queue, types
from portalq.scheduler import worker as worker_module
from portalq.scheduler.config import Settings
from portalq.scheduler.handlers import register_handler
from tests.service_helpers import add_local_portal, worker_in_process

JOB_TYPE = "flush_probe"
HOLD = 30.0   # the longest a held completion may wait here: far above any test's deadline
ran: list[int] = []


class Probe(BaseModel):
    n: int = 0


async def _handler(ctx: Any) -> None:
    ran.append(ctx.job_id)


types.register(types.JobType(JOB_TYPE, Probe, "local"))
register_handler(JOB_TYPE, _handler)


@pytest.fixture
def probes(dsn: str, monkeypatch: pytest.MonkeyPatch):
    add_local_portal(dsn)
    monkeypatch.setattr(worker_module, "FLUSH_HOLD_SECONDS", HOLD)
    ran.clear()

    def enqueue(n: int) -> list[int]:
        return [j.id for j in queue.enqueue_many(
            [queue.NewJob(JOB_TYPE, f"O{i}", {"n": i}) for i in range(n)])]
    return enqueue


def _run(db: str, dsn: str, until, *, deadline: float, stop_early: bool = False) -> float:
    """Run a worker (10 slots, claims of up to 50) until ``until()`` holds; the seconds it
    took. ``stop_early``: stop it (gracefully) as soon as ``until()`` holds."""
    async def go() -> float:
        settings = Settings(database_url=db, node_id="w1", workers=10, claim_batch=50,
                            poll_seconds=0.05)
        async with worker_in_process(settings, dsn):
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            async with asyncio.timeout(deadline):
                while not until():
                    await asyncio.sleep(0.01 if stop_early else 0.05)
            return loop.time() - t0
    return asyncio.run(go())


def _completed(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM portalq.job_queue WHERE status = 'completed'"
                         ).fetchone()[0]


def test_a_busy_queue_writes_several_claims_completions_together(db, dsn, probes):
    ids = probes(120)
    _run(db, dsn, lambda: _completed(dsn) == len(ids), deadline=20)
    with psycopg.connect(dsn) as c:
        writes = c.execute("SELECT count(DISTINCT at) FROM portalq.job_events "
                           "WHERE to_status = 'completed'").fetchone()[0]
    # claims of 10 (the slots); completions gather to a claim's worth (50) while the claims
    # keep coming back full, and the rest go when the last claim finds fewer: 50, 50, 20.
    # Written as they finished, these were a statement per claim (~12).
    assert writes <= 3


def test_held_completions_go_at_once_when_the_queue_goes_quiet(db, dsn, probes):
    ids = probes(15)   # one full claim of 10 (the queue busy), then one of 5 (quiet)
    took = _run(db, dsn, lambda: _completed(dsn) == len(ids), deadline=HOLD / 2)
    assert took < HOLD / 2


def test_a_stopping_worker_writes_the_completions_it_holds(db, dsn, probes):
    probes(400)
    _run(db, dsn, lambda: len(ran) >= 25, deadline=20, stop_early=True)
    with psycopg.connect(dsn) as c:
        rows = dict(c.execute("SELECT status, array_agg(id) FROM portalq.job_queue GROUP BY status"
                              ).fetchall())
    assert "running" not in rows
    assert sorted(rows["completed"]) == sorted(ran)   # every handler that ran, written
    assert len(rows["pending"]) == 400 - len(ran)
