"""Issue 35 item 7: a long real outage gives up on no healthy job; outage signs recorded
at the same moment see each other."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import psycopg
import pytest

from portalq.jobs import queue
from tests.service_helpers import Service, add_local_portal, wait_until


def test_simultaneous_outage_signs_see_each_other(db, dsn):
    """Three jobs of each of five portals show an outage sign at the same moment: every
    portal is paused (each sign counted after the others, not in its own snapshot)."""
    from portalq.jobs import worker_api

    codes = [f"p{i}" for i in range(5)]
    for code in codes:
        add_local_portal(dsn, code=code)
    ids = {code: [j.id for j in queue.enqueue_many([
        queue.NewJob("ledger_job", f"{code}-{n}", {"portal": code}) for n in range(3)])]
        for code in codes}

    async def sign(code: str, job_id: int) -> worker_api.OutageState:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            return await worker_api.record_outage(
                conn, portal=code, job_id=job_id, threshold=3, reason="HTTP 503",
                probe_after=timedelta(seconds=60), window=timedelta(minutes=5))

    async def go() -> list[worker_api.OutageState]:
        # hold every portal's row so the fifteen signs are all in flight together, then
        # let them go at once
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as holder:
            async with holder.transaction():
                await holder.execute("SELECT 1 FROM portalq.portals WHERE code = ANY(%s) FOR UPDATE",
                                     (codes,))
                tasks = [asyncio.ensure_future(sign(code, j))
                         for code in codes for j in ids[code]]
                async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as w:
                    while True:   # all fifteen blocked on the held rows
                        row = await (await w.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                            "'Lock' AND datname = current_database()")).fetchone()
                        assert row is not None
                        if row[0] >= len(tasks) or any(t.done() for t in tasks):
                            break
                        await asyncio.sleep(0.02)
        return await asyncio.gather(*tasks)

    states = asyncio.run(go())
    with psycopg.connect(dsn, autocommit=True) as c:
        paused = dict(c.execute("SELECT code, paused_by FROM portalq.portals WHERE code = ANY(%s)",
                                (codes,)).fetchall())
        notices = c.execute("SELECT count(*) FROM portalq.portal_notices WHERE kind = 'paused'"
                            ).fetchone()[0]
    assert paused == {code: "breaker" for code in codes}
    assert sum(s.just_paused for s in states) == 5 and notices == 5   # one notice each


@pytest.mark.e2e
def test_a_long_outage_gives_up_no_healthy_job_and_the_portal_resumes_by_itself(db, dsn,
                                                                                tmp_path):
    """The portal is down far longer than probe_limit probes: every probe fails for the
    portal's reason (each job's turn comes round), so no job is given up; once it is back,
    the next probe resumes it and every job completes on its first attempt."""
    add_local_portal(dsn, code="down", max_sessions=4)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("INSERT INTO flags VALUES ('maintenance')")
    svc = Service(db, tmp_path, "o", PORTALQ_BREAKER_THRESHOLD=3,
                  PORTALQ_BREAKER_PROBE_SECONDS=0.5, PORTALQ_BREAKER_PROBE_LIMIT=2,
                  PORTALQ_WORKERS=4).start()
    n = 6
    try:
        ids = [j.id for j in queue.enqueue_many([
            queue.NewJob("ledger_job", f"D{i}", {"portal": "down", "honour_maintenance": True})
            for i in range(n)])]
        with psycopg.connect(dsn, autocommit=True) as c:
            def probes() -> int:
                return c.execute("SELECT count(*) FROM portalq.job_events WHERE detail->>'event' IN "
                                 "('probe failed', 'probe given up')").fetchone()[0]
            def waiting() -> int:
                return c.execute("SELECT count(*) FROM portalq.job_queue WHERE status IN "
                                 "('pending', 'deferred', 'running')").fetchone()[0]
            # five failed probes a job on average: over twice the limit for each of them
            # (or no job left waiting: all given up)
            wait_until(lambda: probes() >= 5 * n or not waiting(), 90,
                       "a long outage's probes")
            given_up = c.execute("SELECT count(*) FROM portalq.job_queue WHERE status = 'failed'"
                                 ).fetchone()[0]
            assert given_up == 0, f"{given_up} of {n} healthy jobs given up"
            c.execute("DELETE FROM flags")  # the portal is back
            wait_until(lambda: len(queue.list_jobs(status="completed", limit=n + 1)) == n,
                       60, "all jobs complete after the outage")
            paused = c.execute("SELECT paused_by FROM portalq.portals WHERE code = 'down'").fetchone()[0]
            escalations = c.execute("SELECT count(*) FROM portalq.escalations").fetchone()[0]
    finally:
        svc.stop()
    assert escalations == 0
    assert paused is None   # resumed by itself
    assert [queue.get_job(i)["attempts"] for i in ids] == [1] * n
