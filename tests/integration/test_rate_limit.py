"""Per-key rate limits: one EIN per responsible party per IRS day, across nodes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import psycopg
import pytest

from portalq.jobs import clock, queue, worker_api
from portalq.jobs.worker_api import Capacity
from tests import payloads
from tests.service_helpers import Service, add_local_portal, wait_until

TUE_10_ET = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
WED_07_ET = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _ein(ssn: str) -> dict:
    return {**payloads.OBTAIN_EIN, "responsible_party": {
        **payloads.OBTAIN_EIN["responsible_party"], "ssn": ssn}}


@pytest.mark.parametrize("nodes", [1, 2])
def test_second_ein_same_party_same_day_is_deferred_to_next_portal_day(db, dsn, tmp_path, nodes):
    add_local_portal(dsn)  # also creates the ledger table
    clock.set_clock(clock.FrozenClock(TUE_10_ET))
    a = queue.enqueue("obtain_ein", "ORD-A", _ein("123-45-6789"))
    b = queue.enqueue("obtain_ein", "ORD-B", _ein("123-45-6789"))
    other = queue.enqueue("obtain_ein", "ORD-C", _ein("987-65-4321"))
    env = {"PORTALQ_FROZEN_NOW": TUE_10_ET.isoformat(),
           "PORTALQ_PLUGINS": "tests.plugins.ledger,tests.plugins.ein_ledger"}
    services = [Service(db, tmp_path, f"n{i}", **env).start() for i in range(nodes)]
    try:
        def settled():
            rows = {j: queue.get_job(j)["status"] for j in (a.id, b.id, other.id)}
            return sorted(rows.values()) == ["completed", "completed", "deferred"] and rows
        statuses = wait_until(settled, 30, "one of the two deferred")
    finally:
        for s in services:
            s.stop()
    assert statuses[other.id] == "completed"  # a different party is not limited
    deferred = a.id if statuses[a.id] == "deferred" else b.id
    row = queue.show_job(deferred)
    assert row["attempts"] == 0
    assert row["run_at"] >= datetime(2026, 12, 2, 5, 0, tzinfo=UTC)  # Wed 00:00 ET or later
    assert row["run_at"] <= WED_07_ET
    assert "rate limit" in row["events"][-1]["detail"]["event"] or any(
        "rate limit" in (e["detail"] or {}).get("event", "") for e in row["events"])
    with psycopg.connect(dsn) as c:
        ran = sorted(r[0] for r in c.execute("SELECT job_id FROM ledger").fetchall())
    assert deferred not in ran and len(ran) == 2


# -- the rate checks of one claim, on the real server -------------------------------------

DAY = (TUE_10_ET.replace(hour=5), WED_07_ET.replace(hour=5))   # Tue 00:00-Wed 00:00 ET


def _claim(dsn: str, worker: str, limit: int = 10) -> list[int]:
    async def go():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            jobs = await worker_api.claim(c, worker=worker, limit=limit,
                                          capacities=[Capacity("irs_ein", None, DAY)])
        return [j["id"] for j in jobs]
    return asyncio.run(go())


def _status(conn, job_id: int) -> tuple:
    return conn.execute("SELECT status, attempts, run_at, started_at FROM portalq.job_queue "
                        "WHERE id = %s", (job_id,)).fetchone()


def test_a_claim_of_one_partys_jobs_starts_the_first_in_claim_order(db, dsn, conn):
    """Three EIN jobs of one party in one claim: the highest-priority one starts, the
    others wait for the next portal day (the claim's order decides, not the order in which
    the checks happened to run)."""
    clock.set_clock(clock.FrozenClock(TUE_10_ET))
    low = queue.enqueue("obtain_ein", "ORD-L", _ein("123-45-6789"), priority=0)
    high = queue.enqueue("obtain_ein", "ORD-H", _ein("123-45-6789"), priority=5)
    mid = queue.enqueue("obtain_ein", "ORD-M", _ein("123-45-6789"), priority=1)
    other = queue.enqueue("obtain_ein", "ORD-O", _ein("987-65-4321"), priority=0)
    assert sorted(_claim(dsn, "w1")) == sorted([high.id, other.id])
    for deferred in (mid.id, low.id):
        status, attempts, run_at, started_at = _status(conn, deferred)
        assert (status, attempts, run_at, started_at) == ("deferred", 0, DAY[1], None)
    assert _status(conn, high.id)[:2] == ("running", 1)


def test_a_party_started_earlier_in_the_portal_day_defers_all_its_claimed_jobs(db, dsn, conn):
    clock.set_clock(clock.FrozenClock(TUE_10_ET))
    first = queue.enqueue("obtain_ein", "ORD-1", _ein("123-45-6789"))
    assert _claim(dsn, "w1") == [first.id]
    later = [queue.enqueue("obtain_ein", f"ORD-{i}", _ein("123-45-6789")) for i in (2, 3)]
    assert _claim(dsn, "w2") == []
    assert [_status(conn, j.id)[0] for j in later] == ["deferred", "deferred"]
    assert _status(conn, first.id)[0] == "running"


def test_two_nodes_checking_the_same_parties_in_opposite_orders_start_one_job_each(
        db, dsn, conn):
    """Node A claims (party 1, party 2), node B (party 2, party 1), and their checks run at
    the same time: the keys' locks are taken in one order everywhere, so neither waits
    for the other in a cycle (a deadlock would fail a check and give its jobs back), and
    each party starts exactly one job."""
    clock.set_clock(clock.FrozenClock(TUE_10_ET))
    parties = [f"123-45-{i:04d}" for i in range(1, 9)]
    for i, s in enumerate(parties):
        queue.enqueue("obtain_ein", f"ORD-A{i}", _ein(s), priority=100 - i)
    for i, s in enumerate(reversed(parties)):
        queue.enqueue("obtain_ein", f"ORD-B{i}", _ein(s), priority=50 - i)

    async def go():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as a, \
                await psycopg.AsyncConnection.connect(dsn, autocommit=True) as b:
            got = await asyncio.gather(*(
                worker_api.claim(c, worker=w, limit=len(parties),
                                 capacities=[Capacity("irs_ein", None, DAY)])
                for c, w in ((a, "A"), (b, "B"))))
        return [j["id"] for batch in got for j in batch]

    started = asyncio.run(go())
    rows = conn.execute("SELECT rate_key, status FROM portalq.job_queue ORDER BY id").fetchall()
    by_key: dict[str, list[str]] = {}
    for key, status in rows:
        by_key.setdefault(key, []).append(status)
    assert len(started) == len(parties)
    assert all(sorted(s) == ["deferred", "running"] for s in by_key.values()), by_key
