"""Deferral: closed portals' jobs move to their next opening in bulk, no attempt spent,
claimable exactly from the opening; the service never starts a flow inside the cut-off."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from portalq.jobs import clock, queue, worker_api
from portalq.jobs.worker_api import Capacity
from portalq.scheduler import calendar_cache as calendars
from tests import payloads
from tests.service_helpers import Service, add_local_portal, wait_until

# Saturday 2026-12-05 12:00 UTC = 07:00 ET: the IRS EIN Assistant is closed on weekends
SAT = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
MON_OPEN = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)  # Monday 07:00 ET


async def _load(dsn):
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        return await calendars.load(c)


def test_bulk_deferral_of_100k_due_jobs(dsn, conn):
    clock.set_clock(clock.FrozenClock(SAT))
    conn.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                               created_at, updated_at)
        SELECT 'obtain_ein', 'O' || g, 'irs_ein', '{}', 'pending',
               %s - (g || ' seconds')::interval, %s, %s
        FROM generate_series(1, 100000) g""", (SAT, SAT, SAT))
    conn.execute("ANALYZE portalq.job_queue")
    portals = asyncio.run(_load(dsn))
    irs = portals["irs_ein"]
    assert not calendars.startable(irs, SAT)
    when = calendars.next_startable(irs, SAT)
    assert when == MON_OPEN

    async def defer():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await worker_api.defer_portal(c, portal="irs_ein", next_open=when,
                                                 reason="closed")
    assert asyncio.run(defer()) == 100_000
    rows = conn.execute("SELECT status, run_at, max(attempts), count(*) FROM portalq.job_queue "
                        "GROUP BY 1, 2").fetchall()
    assert rows == [("deferred", MON_OPEN, 0, 100_000)]
    assert conn.execute("SELECT count(*) FROM portalq.job_events WHERE to_status = 'deferred'"
                        ).fetchone()[0] == 100_000
    # a second tick finds nothing to do
    assert asyncio.run(defer()) == 0


def _due_jobs(conn, n: int) -> list[int]:
    """``n`` due pending jobs of the (closed on Saturday) IRS portal, over three priorities."""
    return [r[0] for r in conn.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, priority, run_at,
                               created_at, updated_at)
        SELECT 'obtain_ein', 'O' || g, 'irs_ein', '{}', 'pending', g %% 3,
               %s - (g || ' seconds')::interval, %s, %s
        FROM generate_series(1, %s) g RETURNING id""", (SAT, SAT, SAT, n)).fetchall()]


def _defer(dsn, **kw):
    async def go():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await worker_api.defer_portal(c, portal="irs_ein", next_open=MON_OPEN,
                                                 reason="closed", **kw)
    return asyncio.run(go())


def _deferral_events(conn) -> list[tuple[int, int]]:
    """(job, transaction) of every deferral event."""
    return conn.execute("SELECT job_id, xmin::text::bigint FROM portalq.job_events "
                        "WHERE to_status = 'deferred'").fetchall()


def test_bulk_deferral_runs_in_bounded_batches_each_job_once(conn, dsn):
    clock.set_clock(clock.FrozenClock(SAT))
    ids = _due_jobs(conn, 2_500)
    assert _defer(dsn, batch=1_000) == 2_500
    events = _deferral_events(conn)
    assert sorted(j for j, _ in events) == sorted(ids)          # each job exactly once
    per_tx = Counter(tx for _, tx in events)
    assert sorted(per_tx.values()) == [500, 1_000, 1_000]       # three bounded transactions
    assert conn.execute("SELECT status, run_at, max(attempts), count(*) FROM portalq.job_queue "
                        "GROUP BY 1, 2").fetchall() == [("deferred", MON_OPEN, 0, 2_500)]


def test_bulk_deferral_stops_at_its_budget_and_the_next_call_finishes(conn, dsn):
    clock.set_clock(clock.FrozenClock(SAT))
    ids = _due_jobs(conn, 2_500)
    assert _defer(dsn, batch=1_000, budget_seconds=0) == 1_000   # one batch at least
    assert _defer(dsn, batch=1_000) == 1_500
    assert sorted(j for j, _ in _deferral_events(conn)) == sorted(ids)
    assert _defer(dsn, batch=1_000) == 0


def test_a_refused_row_is_left_out_and_every_other_job_deferred_once(conn, dsn):
    clock.set_clock(clock.FrozenClock(SAT))
    ids = _due_jobs(conn, 2_500)
    poison = ids[1_234]
    conn.execute(f"ALTER TABLE portalq.job_queue ADD CONSTRAINT poison CHECK "
                 f"(id <> {poison} OR status <> 'deferred') NOT VALID")
    with pytest.raises(worker_api.DeferIncomplete) as err:
        _defer(dsn, batch=1_000)
    assert err.value.deferred == 2_499 and err.value.stuck == [poison]
    assert str(poison) in str(err.value)
    assert sorted(j for j, _ in _deferral_events(conn)) == sorted(set(ids) - {poison})
    assert conn.execute("SELECT status FROM portalq.job_queue WHERE id = %s", (poison,)
                        ).fetchone()[0] == "pending"
    assert conn.execute("SELECT count(*) FROM portalq.job_queue WHERE status = 'deferred' "
                        "AND run_at = %s", (MON_OPEN,)).fetchone()[0] == 2_499


def test_a_portal_whose_every_row_is_refused_gives_up_after_max_stuck(conn, dsn):
    """A constraint refusing all of a portal's deferrals costs a bounded number of
    statements per tick (not two per job): it stops past MAX_STUCK refused rows."""
    from portalq.jobs import deferral

    clock.set_clock(clock.FrozenClock(SAT))
    _due_jobs(conn, 2_500)
    conn.execute("ALTER TABLE portalq.job_queue ADD CONSTRAINT poison CHECK "
                 "(portal <> 'irs_ein' OR status <> 'deferred') NOT VALID")
    before = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database "
                          "WHERE datname = current_database()").fetchone()[0]
    with pytest.raises(worker_api.DeferIncomplete) as err:
        _defer(dsn, batch=1_000)
    assert err.value.deferred == 0
    assert deferral.MAX_STUCK <= len(err.value.stuck) <= 1_000
    assert _deferral_events(conn) == []
    conn.execute("SELECT pg_stat_clear_snapshot()")
    after = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database "
                         "WHERE datname = current_database()").fetchone()[0]
    assert after - before < 600     # two per job would be 5,000


def test_deferral_covers_every_priority_and_leaves_later_jobs_alone(dsn, conn):
    clock.set_clock(clock.FrozenClock(SAT))
    later = MON_OPEN + timedelta(days=3)
    conn.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, priority, run_at,
                               created_at, updated_at)
        SELECT 'obtain_ein', 'O' || g, 'irs_ein', '{}', 'pending', p, %s, %s, %s
        FROM generate_series(1, 10) g, unnest(ARRAY[-100, -5, 0, 7, 100]) p""",
                 (SAT - timedelta(minutes=1), SAT, SAT))
    conn.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, priority, run_at,
                               created_at, updated_at)
        SELECT 'obtain_ein', 'L' || g, 'irs_ein', '{}', 'deferred', 3, %s, %s, %s
        FROM generate_series(1, 10) g""", (later, SAT, SAT))

    async def defer():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await worker_api.defer_portal(c, portal="irs_ein", next_open=MON_OPEN,
                                                 reason="closed")
    assert asyncio.run(defer()) == 50
    rows = conn.execute("SELECT status, run_at, count(*) FROM portalq.job_queue GROUP BY 1, 2 "
                        "ORDER BY 2").fetchall()
    assert rows == [("deferred", MON_OPEN, 50), ("deferred", later, 10)]


def _claim(dsn, now):
    async def go():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await worker_api.claim(c, worker="w", limit=10, now=now,
                                          capacities=[Capacity("irs_ein", 1)])
    return asyncio.run(go())


def test_deferred_job_claimable_at_the_opening_not_before(dsn):
    clock.set_clock(clock.FrozenClock(SAT))
    job = queue.enqueue("obtain_ein", "O", payloads.OBTAIN_EIN)

    async def defer():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await worker_api.defer_portal(c, portal="irs_ein", next_open=MON_OPEN,
                                                 reason="closed")
    assert asyncio.run(defer()) == 1
    assert _claim(dsn, MON_OPEN - timedelta(microseconds=1)) == []
    [claimed] = _claim(dsn, MON_OPEN)
    assert claimed["id"] == job.id and claimed["attempts"] == 1
    assert claimed["from_status"] == "deferred"


def test_service_defers_closed_portal_and_respects_cutoff(db, dsn, tmp_path):
    add_local_portal(dsn)
    # Tuesday 2026-12-01 21:50 ET: the IRS portal is open for 10 more minutes, but its
    # cut-off is 15 minutes: a flow must not start; the job waits for Wednesday 07:00 ET.
    now = datetime(2026, 12, 2, 2, 50, tzinfo=UTC)
    clock.set_clock(clock.FrozenClock(now))
    irs = queue.enqueue("ledger_job", "O-IRS", {"portal": "irs_ein"})
    local = queue.enqueue("ledger_job", "O-LOCAL", {})
    svc = Service(db, tmp_path, "n", PORTALQ_FROZEN_NOW=now.isoformat()).start()
    try:
        wait_until(lambda: queue.get_job(irs.id)["status"] == "deferred", 30, "deferral")
        wait_until(lambda: queue.get_job(local.id)["status"] == "completed", 30, "local job")
    finally:
        svc.stop()
    row = queue.get_job(irs.id)
    assert row["run_at"] == datetime(2026, 12, 2, 12, 0, tzinfo=UTC)  # Wed 07:00 ET
    assert row["attempts"] == 0
    with psycopg.connect(dsn) as c:
        ran = [r[0] for r in c.execute("SELECT job_id FROM ledger").fetchall()]
    assert ran == [local.id]  # the IRS flow never started
