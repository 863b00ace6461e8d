"""Results back to the app (issue 36): a real LISTEN connection on ``portalq_job_status``
hears each decided job -- id, order id, type, status -- once per statement, and nothing of
the queue's own work (claims, a waiting job's re-checks); a job that begins waiting on its
portal, and a person's decision (with what was decided).

A test that something is *not* sent never waits for silence: it does the silent thing, then
a telling one, and checks that the first notification heard is the telling one's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from portalq.jobs import clock, queue, worker_api
from portalq.jobs.audit import Actor
from portalq.jobs.operations import approvals, questions
from portalq.jobs.worker_api import Capacity
from tests import event_kinds, payloads

T0 = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)
CHANNEL = "portalq_job_status"


@pytest.fixture
def frozen() -> clock.FrozenClock:
    c = clock.FrozenClock(T0)
    clock.set_clock(c)
    return c


@pytest.fixture
def listener(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f"LISTEN {CHANNEL}")
        yield c


def heard(listener: psycopg.Connection[Any], n: int) -> list[list[dict[str, Any]]]:
    """The next ``n`` notifications' payloads (each a list of jobs)."""
    got = [json.loads(m.payload) for m in listener.notifies(timeout=30, stop_after=n)]
    assert len(got) == n, got
    return got


async def _claim_all(dsn: str, worker: str = "w1", limit: int = 50) -> list[Any]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        return await worker_api.claim(c, worker=worker, limit=limit,
                                      capacities=[Capacity("email", None)])


async def _complete(dsn: str, ids: list[int], worker: str = "w1") -> set[int]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        return await worker_api.complete_many(c, worker=worker,
                                              results=[(i, {"sent": True}) for i in ids])


def test_a_completed_batch_is_heard_in_chunks_and_a_claim_is_not(dsn, frozen, listener):
    jobs = queue.enqueue_many([queue.NewJob("deliver", f"ORD-{i}", payloads.DELIVER)
                               for i in range(20)])
    claimed = asyncio.run(_claim_all(dsn))
    assert len(claimed) == 20            # a claim of twenty: silent (the next is the batch)
    assert asyncio.run(_complete(dsn, [j["id"] for j in claimed])) == {j.id for j in jobs}
    first, second = heard(listener, 2)   # one statement, two notifications of <= 16 jobs
    assert (len(first), len(second)) == (16, 4)
    assert sorted(first + second, key=lambda m: m["id"]) == [
        {"id": j.id, "order_id": f"ORD-{i}", "type": "deliver", "status": "completed"}
        for i, j in enumerate(jobs)]


def test_failed_cancelled_and_waiting_for_a_person_are_heard(dsn, frozen, listener):
    a, b, c = (queue.enqueue("deliver", o, payloads.DELIVER) for o in ("A", "B", "C"))
    queue.cancel(c.id)
    claimed = {j["id"]: j for j in asyncio.run(_claim_all(dsn))}
    assert set(claimed) == {a.id, b.id}

    async def go() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await questions.ask(conn, job_id=a.id, attempt=1, question="the code mailed?",
                                deadline=clock.now())
            assert await worker_api.finish_unsuccessful(
                conn, job=claimed[b.id], worker="w1", status="failed", error="refused")
    asyncio.run(go())
    got = [m for batch in heard(listener, 3) for m in batch]
    assert got == [
        {"id": c.id, "order_id": "C", "type": "deliver", "status": "cancelled"},
        {"id": a.id, "order_id": "A", "type": "deliver", "status": "waiting_for_person"},
        {"id": b.id, "order_id": "B", "type": "deliver", "status": "failed"}]


def test_heard_after_commit_only_and_whatever_the_callers_search_path(dsn, frozen, listener):
    """The app cancels in its own transaction, its search path on its own schema, where its
    own (legacy) ``job_queue`` lives: the trigger reads portalq's, and tells on commit."""
    a, b = (queue.enqueue("deliver", o, payloads.DELIVER) for o in ("ORD-A", "ORD-B"))
    with psycopg.connect(dsn, autocommit=True) as app:
        app.execute("CREATE TABLE public.job_queue (id bigint, order_id text, job_type text)")
        app.execute("INSERT INTO public.job_queue VALUES (%s, 'THE-APPS', 'legacy'), "
                    "(%s, 'THE-APPS', 'legacy')", (a.id, b.id))
    with psycopg.connect(dsn, options="-c search_path=public") as app:
        queue.cancel(a.id, conn=app)
        app.rollback()                   # not committed: never heard
        queue.cancel(b.id, conn=app)
        app.commit()
    assert heard(listener, 1) == [[
        {"id": b.id, "order_id": "ORD-B", "type": "deliver", "status": "cancelled"}]]


def test_waiting_on_the_portal_is_heard_once_when_the_wait_begins(dsn, frozen, listener):
    w = queue.enqueue("deliver", "ORD-W", payloads.DELIVER)
    first = event_kinds.check_portal(dsn, w.id)        # the first check: heard
    assert heard(listener, 1) == [[{"id": w.id, "order_id": "ORD-W", "type": "deliver",
                                    "status": "waiting_on_portal"}]]
    frozen.set(datetime.fromisoformat(first["next_check"]))
    again = event_kinds.check_portal(dsn, w.id)        # a re-check (and its claim): silent
    assert again["checks"] == 2
    other = queue.enqueue("deliver", "ORD-X", payloads.DELIVER)
    queue.cancel(other.id)                             # the next thing heard is this
    assert heard(listener, 1) == [[{"id": other.id, "order_id": "ORD-X", "type": "deliver",
                                    "status": "cancelled"}]]


def test_a_wait_whose_first_check_was_lost_is_heard_at_its_first_deferral(dsn, frozen,
                                                                          listener):
    w = queue.enqueue("deliver", "ORD-L", payloads.DELIVER)
    event_kinds.saved_then_lost(dsn, w.id)              # its marker says one check: not told
    assert event_kinds.check_portal(dsn, w.id)["checks"] == 2
    assert heard(listener, 1) == [[{"id": w.id, "order_id": "ORD-L", "type": "deliver",
                                    "status": "waiting_on_portal"}]]


def test_a_persons_decision_is_heard_with_what_was_decided(dsn, frozen, listener):
    ok, no, filed, not_filed = (queue.enqueue("deliver", f"ORD-{o}", payloads.DELIVER)
                                for o in ("OK", "NO", "FILED", "NOT"))
    for job in (ok, no):
        event_kinds.awaiting_approval(dsn, job.id)
    for job in (filed, not_filed):
        event_kinds.failed_in_doubt(dsn, job.id)
    admin = Actor("ada", "admin", "cli")
    with psycopg.connect(dsn) as c:
        approvals.decide(c, admin, ok.id, "approved", "the review page is right")
        approvals.decide(c, admin, no.id, "rejected", "wrong director")
        c.commit()
    queue.resolve_filed(filed.id, "BC1234567", actor="ada")
    queue.resolve_not_filed(not_filed.id, actor="ada")

    def told(job: Any, order: str, status: str, decision: str | None = None) -> dict[str, Any]:
        return {"id": job.id, "order_id": f"ORD-{order}", "type": "deliver", "status": status,
                **({"decision": decision} if decision else {})}

    assert heard(listener, 5) == [
        [told(ok, "OK", "decided", "approved")],
        [told(no, "NO", "decided", "rejected")],
        [told(no, "NO", "cancelled")],
        [told(filed, "FILED", "completed"), told(filed, "FILED", "decided", "filed")],
        [told(not_filed, "NOT", "decided", "not_filed")]]


def test_a_claims_events_are_not_read_again_by_the_trigger(conn):
    """Issue 48 #22 / 49.2: the status trigger returns at once for a statement whose events
    it tells nothing of (a claim's ``running`` rows): before, it ran its whole query -- the
    events read again, the job and the subscriptions joined -- 0.15 ms of a 0.38 ms claim.
    Seen in the transaction's own statistics: no read of ``job_events`` by the trigger."""
    job = queue.enqueue("file_entity", "ORD-1", payloads.FILE_ENTITY_DE, conn=conn).id

    def reads(c: psycopg.Connection[Any], to_status: str) -> int:
        with c.transaction():
            c.execute("INSERT INTO portalq.job_events (job_id, at, attempt, from_status, "
                      "to_status, worker) VALUES (%s, now(), 1, 'pending', %s, 'w')",
                      (job, to_status))
            row = c.execute("SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) "
                            "FROM pg_stat_xact_user_tables WHERE relid IN "
                            "('portalq.job_queue'::regclass)").fetchone()
            return int(row[0]) if row else 0

    assert reads(conn, "running") == 0          # a claim's event: nothing read
    assert reads(conn, "completed") > 0         # a told one: the job read for its element
