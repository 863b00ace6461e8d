"""A claim carries the completions waiting to be written: one statement, one commit
(issue 19: at ten slots a worker used to spend a claim and a separate completion write,
each with its own commit, on every ten jobs). What it must not change: every completion is
written exactly once, one the claim could not write goes back to the flush loop, and a
portal resumed by a success is still announced."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import psycopg
import pytest

from jobs import clock, queue, sql, types, worker_api
from jobs.worker_api import Capacity
from scheduler.config import Settings
from scheduler.handlers import register_handler
from scheduler.worker import Worker, make_pool
from tests import payloads
from tests.plugins.ledger import LedgerPayload
from tests.service_helpers import add_local_portal

T0 = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)  # a Tuesday: every seeded portal open


@pytest.fixture
def frozen() -> clock.FrozenClock:
    c = clock.FrozenClock(T0)
    clock.set_clock(c)
    return c


async def _aconn(dsn: str) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(dsn, autocommit=True)


def _xmin(conn: psycopg.Connection, job_id: int) -> int:
    return int(conn.execute("SELECT xmin::text FROM job_queue WHERE id = %s",
                            (job_id,)).fetchone()[0])


def test_a_claim_writes_the_completions_it_carries_in_its_own_commit(dsn, conn, frozen):
    a = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    b = queue.enqueue("name_search", "B", payloads.NAME_SEARCH)
    caps = [Capacity("bc_corporate_online", None)]

    async def go():
        async with await _aconn(dsn) as c:
            first = await worker_api.claim(c, worker="w1", limit=1, capacities=caps)
            assert [j["id"] for j in first] == [a.id]
            return await worker_api.claim(c, worker="w1", limit=5, capacities=caps,
                                          completions=[(a.id, {"name": "free"})])
    second = asyncio.run(go())
    assert [j["id"] for j in second] == [b.id]
    row = conn.execute("SELECT status, result, lock_owner FROM job_queue WHERE id = %s",
                       (a.id,)).fetchone()
    assert row == ("completed", {"name": "free"}, None)
    assert _xmin(conn, a.id) == _xmin(conn, b.id)    # one transaction wrote both
    events = dict(conn.execute(
        "SELECT job_id, xmin::text FROM job_events WHERE (job_id, to_status) IN "
        "((%s, 'completed'), (%s, 'running'))", (a.id, b.id)).fetchall())
    assert events[a.id] == events[b.id] == str(_xmin(conn, a.id))


def test_a_completion_not_held_by_the_claimer_is_not_written(dsn, conn, frozen):
    """The claim's completions keep complete_many's guard: only a job this node runs."""
    a = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    caps = [Capacity("bc_corporate_online", None)]

    async def go():
        async with await _aconn(dsn) as c:
            await worker_api.claim(c, worker="w1", limit=1, capacities=caps)
            return await worker_api.claim(c, worker="w2", limit=5, capacities=caps,
                                          completions=[(a.id, {})])
    assert asyncio.run(go()) == []
    assert conn.execute("SELECT status, lock_owner FROM job_queue WHERE id = %s",
                        (a.id,)).fetchone() == ("running", "w1")


def test_a_success_that_resumes_a_paused_portal_still_announces_it(dsn, conn, frozen):
    """The NOTIFY of a portal the breaker had paused rides in a data-modifying CTE's
    RETURNING (read by no one): it must still be sent."""
    a = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    caps = [Capacity("bc_corporate_online", None)]

    async def take():
        async with await _aconn(dsn) as c:
            await worker_api.claim(c, worker="w1", limit=1, capacities=caps)
    asyncio.run(take())
    conn.execute("UPDATE portals SET paused_at = now(), paused_by = 'breaker', "
                 "outage_streak = 3 WHERE code = 'bc_corporate_online'")
    conn.commit()
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN portalq_portals")

        async def finish():
            async with await _aconn(dsn) as c:
                await worker_api.complete_many(c, worker="w1", results=[(a.id, {})])
        asyncio.run(finish())
        notes = list(listener.notifies(timeout=5, stop_after=1))
    assert [n.payload for n in notes] == ["bc_corporate_online"]
    assert conn.execute("SELECT paused_by FROM portals WHERE code = 'bc_corporate_online'"
                        ).fetchone() == (None,)


def _worker(db: str, dsn: str, workers: int) -> tuple[Settings, object]:
    settings = Settings(database_url=db, node_id="pig", workers=workers, poll_seconds=0.05)
    return settings, make_pool(settings, dsn)


def _register_quick() -> None:
    async def quick(ctx) -> dict:
        return {"order": ctx.order_id}
    types.register(types.JobType("quick_probe", LedgerPayload, lambda p: p.portal))
    register_handler("quick_probe", quick)


def test_a_worker_writes_each_completion_with_its_next_claim(db, dsn, conn):
    """One slot, three jobs: the first two completions are written by the claims of the
    jobs after them (their transactions are the same), the last by the flush loop."""
    add_local_portal(dsn, code="local")
    _register_quick()
    ids = [queue.enqueue("quick_probe", f"Q{i}", {"portal": "local"}).id for i in range(3)]

    async def go():
        settings, pool = _worker(db, dsn, workers=1)
        await pool.open(wait=True, timeout=30)
        worker = Worker(settings, pool, dsn)
        await worker.refresh_portals()
        loops = worker.start_loops()
        try:
            async with asyncio.timeout(30):
                while _done(dsn) < 3:
                    await asyncio.sleep(0.02)
        finally:
            await worker.stop_loops(loops, grace=5)
            await pool.close()
    asyncio.run(go())
    rows = dict(conn.execute(
        "SELECT job_id, xmin::text FROM job_events WHERE job_id = ANY(%s) AND "
        "to_status = 'completed'", (ids,)).fetchall())
    claims = dict(conn.execute(
        "SELECT job_id, xmin::text FROM job_events WHERE job_id = ANY(%s) AND "
        "to_status = 'running'", (ids,)).fetchall())
    assert rows[ids[0]] == claims[ids[1]]
    assert rows[ids[1]] == claims[ids[2]]
    assert conn.execute("SELECT count(*) FROM job_events WHERE job_id = ANY(%s) AND "
                        "to_status = 'completed'", (ids,)).fetchone()[0] == 3


def test_completions_a_failed_claim_carried_go_back_to_the_flush(db, dsn, conn, monkeypatch):
    """The claim carrying completions fails (the server went away mid-statement): its
    completions are written by the flush loop instead, once each, and the jobs after them
    still run."""
    add_local_portal(dsn, code="local")
    _register_quick()
    ids = [queue.enqueue("quick_probe", f"Q{i}", {"portal": "local"}).id for i in range(3)]
    real = sql.afetch
    failed: list[list[int]] = []

    async def flaky(c, name, params=None, **kw):
        if name == "complete_and_claim" and not failed:
            failed.append(list(params["ids"]))
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return await real(c, name, params, **kw)
    monkeypatch.setattr(sql, "afetch", flaky)

    async def go():
        settings, pool = _worker(db, dsn, workers=1)
        await pool.open(wait=True, timeout=30)
        worker = Worker(settings, pool, dsn)
        await worker.refresh_portals()
        loops = worker.start_loops()
        try:
            async with asyncio.timeout(30):
                while _done(dsn) < 3:
                    await asyncio.sleep(0.02)
        finally:
            await worker.stop_loops(loops, grace=5)
            await pool.close()
    asyncio.run(go())
    assert failed == [[ids[0]]]
    assert conn.execute("SELECT job_id, count(*) FROM job_events WHERE job_id = ANY(%s) AND "
                        "to_status = 'completed' GROUP BY 1 ORDER BY 1", (ids,)
                        ).fetchall() == [(i, 1) for i in ids]
    assert conn.execute("SELECT count(*) FROM job_queue WHERE id = ANY(%s) AND attempts = 1",
                        (ids,)).fetchone()[0] == 3    # none ran twice


def _done(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM job_queue WHERE job_type = 'quick_probe' AND "
                         "status = 'completed'").fetchone()[0]
