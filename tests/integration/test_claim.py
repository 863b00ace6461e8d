"""Claim / finish / heartbeat / rescue / admin transitions on the real server."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from portalq.jobs import clock, queue, retry, worker_api
from portalq.jobs.errors import IllegalTransition, JobNotFound
from portalq.jobs.worker_api import Capacity
from tests import checkpoints, payloads

T0 = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)  # a Tuesday: every seeded portal open


@pytest.fixture
def frozen() -> clock.FrozenClock:
    c = clock.FrozenClock(T0)
    clock.set_clock(c)
    return c


def run(coro):
    return asyncio.run(coro)


async def _aconn(dsn: str) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(dsn, autocommit=True)


def claim(dsn, worker="w1", portals=("bc_corporate_online",), limit=10, caps=None):
    async def go():
        async with await _aconn(dsn) as c:
            return await worker_api.claim(c, worker=worker, limit=limit, capacities=[
                Capacity(p, (caps or {}).get(p)) for p in portals])
    return run(go())


def test_claim_orders_by_priority_then_run_at_and_skips_future(dsn, frozen):
    a = queue.enqueue("name_search", "A", payloads.NAME_SEARCH, run_at=T0 - timedelta(minutes=5))
    b = queue.enqueue("name_search", "B", payloads.NAME_SEARCH, run_at=T0 - timedelta(minutes=9))
    c = queue.enqueue("name_search", "C", payloads.NAME_SEARCH, priority=5,
                      run_at=T0 - timedelta(minutes=1))
    queue.enqueue("name_search", "D", payloads.NAME_SEARCH, run_at=T0 + timedelta(minutes=1))
    got = claim(dsn, limit=10)
    assert [j["id"] for j in got] == [c.id, b.id, a.id]
    assert all(j["attempts"] == 1 for j in got)
    assert claim(dsn) == []  # D is not due yet
    frozen.advance(minutes=2)
    assert [j["order_id"] for j in claim(dsn)] == ["D"]


def test_concurrent_claims_are_disjoint(dsn, frozen):
    queue.enqueue_many([queue.NewJob("deliver", f"O{i}", payloads.DELIVER) for i in range(200)])

    async def go():
        conns = [await _aconn(dsn) for _ in range(4)]
        try:
            batches = await asyncio.gather(*(
                worker_api.claim(c, worker=f"w{i}", limit=60,
                                 capacities=[Capacity("email", None)])
                for i, c in enumerate(conns)))
        finally:
            for c in conns:
                await c.close()
        return batches

    batches = run(go())
    ids = [j["id"] for b in batches for j in b]
    assert len(ids) == len(set(ids)) == 200


def test_portal_limit_holds_across_claimers(dsn, frozen, conn):
    queue.enqueue_many([queue.NewJob("obtain_ein", f"O{i}", {**payloads.OBTAIN_EIN,
                        "responsible_party": {**payloads.OBTAIN_EIN["responsible_party"],
                                              "ssn": f"123-45-{i:04d}"}}) for i in range(5)])
    got = [claim(dsn, worker=f"w{i}", portals=("irs_ein",), caps={"irs_ein": 2})
           for i in range(3)]
    assert [len(g) for g in got] == [2, 0, 0]
    running = conn.execute("SELECT count(*) FROM portalq.job_queue WHERE status='running'").fetchone()[0]
    assert running == 2


def test_complete_records_result_and_event(dsn, frozen, conn):
    job = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    [j] = claim(dsn)

    async def go():
        async with await _aconn(dsn) as c:
            return await worker_api.complete_many(c, worker="w1",
                                                  results=[(j["id"], {"nr_number": "NR 1"})])
    assert run(go()) == {job.id}
    row = queue.get_job(job.id)
    assert (row["status"], row["result"], row["lock_owner"]) == ("completed", {"nr_number": "NR 1"}, None)
    events = [(e["from_status"], e["to_status"]) for e in queue.show_job(job.id)["events"]]
    assert events == [(None, "pending"), ("pending", "running"), ("running", "completed")]


def test_backoff_grows_with_jitter_and_is_capped():
    rng = random.Random(7)
    for attempt in range(1, 12):
        ceiling = min(retry.CAP_S, retry.BASE_S * 2 ** (attempt - 1))
        values = [retry.backoff(attempt, rng=rng).total_seconds() for _ in range(200)]
        assert all(ceiling / 2 <= v <= ceiling for v in values)
        assert max(values) - min(values) > ceiling / 4  # jitter really spreads retries
    assert retry.decide(attempt=5, max_attempts=5, kind="retryable", now=T0).action == "fail"
    d = retry.decide(attempt=4, max_attempts=5, kind="retryable", now=T0, rng=rng)
    assert d.action == "retry" and T0 + timedelta(seconds=120) <= d.run_at <= T0 + timedelta(seconds=240)
    assert retry.decide(attempt=1, max_attempts=5, kind="permanent", now=T0).action == "fail"


def _fail_once(dsn, frozen, job_id, *, kind="retryable"):
    [j] = claim(dsn)
    assert j["id"] == job_id
    decision = retry.decide(attempt=j["attempts"], max_attempts=j["max_attempts"], kind=kind,
                            now=clock.now())

    async def go():
        async with await _aconn(dsn) as c:
            if decision.action == "retry":
                return await worker_api.finish_unsuccessful(
                    c, job=j, worker="w1", status="pending", error="timeout",
                    run_at=decision.run_at)
            return await worker_api.finish_unsuccessful(
                c, job=j, worker="w1", status="failed", error="timeout",
                escalation=("attempts" if kind == "retryable" else "business", "boom"))
    assert run(go())
    return decision


def test_five_attempts_then_failed_with_one_escalation(dsn, frozen, conn):
    job = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    for attempt in range(1, 6):
        decision = _fail_once(dsn, frozen, job.id)
        row = queue.get_job(job.id)
        assert row["attempts"] == attempt
        if attempt < 5:
            assert row["status"] == "pending" and row["run_at"] == decision.run_at
            frozen.set(decision.run_at)
    assert queue.get_job(job.id)["status"] == "failed"
    assert conn.execute("SELECT job_id, attempt, kind FROM portalq.escalations").fetchall() == [
        (job.id, 5, "attempts")]
    assert claim(dsn) == []


def test_permanent_error_fails_at_once(dsn, frozen, conn):
    job = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    _fail_once(dsn, frozen, job.id, kind="permanent")
    row = queue.get_job(job.id)
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert conn.execute("SELECT count(*) FROM portalq.escalations").fetchone()[0] == 1


def test_escalation_written_once_per_failure(dsn, frozen, conn):
    job = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    _fail_once(dsn, frozen, job.id, kind="permanent")
    c = conn
    assert queue.escalate(c, job.id, 1, "business", "again") is None  # same failure: no 2nd
    queue.retry(job.id)
    _fail_once(dsn, frozen, job.id, kind="permanent")  # a new failure after admin retry
    assert conn.execute("SELECT attempt FROM portalq.escalations ORDER BY id").fetchall() == [(1,), (2,)]


def test_defer_refunds_the_attempt(dsn, frozen):
    job = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    [j] = claim(dsn)

    async def go():
        async with await _aconn(dsn) as c:
            return await worker_api.finish_unsuccessful(
                c, job=j, worker="w1", status="deferred", error="portal closed",
                run_at=T0 + timedelta(hours=3), refund_attempt=True)
    assert run(go())
    row = queue.get_job(job.id)
    assert (row["status"], row["attempts"], row["run_at"]) == ("deferred", 0, T0 + timedelta(hours=3))


def test_heartbeat_checkpoint_and_rescue(dsn, frozen, conn):
    a = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    b = queue.enqueue("obtain_ein", "B", payloads.OBTAIN_EIN)
    c_ = queue.enqueue("name_search", "C", payloads.NAME_SEARCH)
    claimed = claim(dsn, portals=("bc_corporate_online", "irs_ein"), limit=10)
    assert {j["id"] for j in claimed} == {a.id, b.id, c_.id}

    async def go():
        async with await _aconn(dsn) as c:
            # A heartbeat counts from the server's start at the earliest (stale_running):
            # the clock moves past it, so the test means the same on any day it runs.
            cur = await c.execute("SELECT pg_postmaster_start_time()")
            started = (await cur.fetchone())[0]
            frozen.set(max(frozen(), started + timedelta(minutes=2)))
            doubt = {**checkpoints.in_doubt("ein_application"), "ref": "X1"}
            cp = await worker_api.save_checkpoint(c, job_id=b.id, worker="w1", data=doubt)
            assert cp == doubt
            # another worker cannot write to w1's job
            assert await worker_api.save_checkpoint(c, job_id=b.id, worker="w2",
                                                    data={"stage": "x"}) is None
            frozen.advance(seconds=50)
            assert await worker_api.heartbeat(c, worker="w1", ids=[c_.id]) == {c_.id}
            frozen.advance(seconds=20)
            return await worker_api.rescue_stale(c, stale_after=timedelta(seconds=60))

    rescued = dict(run(go()))
    # a: stale, back to the queue; b: stale past the IRS point of no return -> a human;
    # c: heart-beating, left alone
    assert rescued == {a.id: "pending", b.id: "failed"}
    assert queue.get_job(c_.id)["status"] == "running"
    assert conn.execute("SELECT job_id, kind FROM portalq.escalations").fetchall() == [(b.id, "uncertain")]

    async def late():
        async with await _aconn(dsn) as c:
            # the lost worker finishing late cannot overwrite the rescued job
            return await worker_api.complete_many(c, worker="w1", results=[(a.id, {})])
    assert run(late()) == set()
    assert queue.get_job(a.id)["status"] == "pending"


def test_cancel_and_admin_retry_transitions(dsn, frozen):
    job = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    with pytest.raises(IllegalTransition):
        queue.retry(job.id)  # pending: nothing to retry
    claim(dsn)
    with pytest.raises(IllegalTransition):
        queue.cancel(job.id)  # running jobs are not cancelled under a worker
    with pytest.raises(JobNotFound):
        queue.cancel(999_999)


def test_admin_retry_keeps_checkpoints_and_validates_patch(dsn, frozen):
    job = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    [j] = claim(dsn)

    async def go():
        async with await _aconn(dsn) as c:
            await worker_api.save_checkpoint(c, job_id=j["id"], worker="w1", data={"nr": "NR 1"})
            await worker_api.finish_unsuccessful(c, job=j, worker="w1", status="failed",
                                                 error="name rejected",
                                                 escalation=("business", "rejected"))
    run(go())
    from portalq.jobs.errors import InputError
    with pytest.raises(InputError):
        queue.retry(job.id, payload_patch={"names": []})
    assert queue.get_job(job.id)["status"] == "failed"
    queue.retry(job.id, payload_patch={"names": ["Other Name Ltd."]}, note="new name")
    row = queue.show_job(job.id)
    assert row["status"] == "pending" and row["checkpoint"] == {"nr": "NR 1"}
    assert row["payload"]["names"] == ["Other Name Ltd."]
    assert row["max_attempts"] == 1 + 5
    assert row["events"][-1]["detail"]["payload_changed"] == ["names"]


def test_prune_deletes_old_finished_jobs_with_their_events_documents_and_artifacts(
        dsn, conn, frozen):
    """Retention: completed/cancelled jobs finished before the cut-off go, with everything
    recorded about them (job_events has no foreign key: the prune deletes them itself)."""
    old_done, waiting, recent_done, old_cancelled = (
        queue.enqueue("name_search", f"P{i}", payloads.NAME_SEARCH) for i in range(4))
    claimed = {j["id"]: j for j in claim(dsn, limit=10)}
    assert set(claimed) == {old_done.id, waiting.id, recent_done.id, old_cancelled.id}

    async def finish():
        async with await _aconn(dsn) as c:
            await worker_api.store_document(c, job_id=old_done.id, name="a.pdf",
                                            content_type="application/pdf", data=b"%PDF")
            await worker_api.add_artifact(c, job_id=old_done.id, attempt=1, kind="screenshot",
                                          path="1/attempt-1/x.png")
            await worker_api.complete_many(c, worker="w1", results=[(old_done.id, {})])
            for job_id in (old_cancelled.id, waiting.id):     # back to pending (a retry)
                await worker_api.finish_unsuccessful(c, job=claimed[job_id], worker="w1",
                                                     status="pending", error="retry later")
    run(finish())
    queue.cancel(old_cancelled.id)
    frozen.advance(days=40)

    async def finish_recent():
        async with await _aconn(dsn) as c:
            await worker_api.complete_many(c, worker="w1", results=[(recent_done.id, {})])
    run(finish_recent())

    async def prune():
        async with await _aconn(dsn) as c:
            return await worker_api.prune_finished(c, older_than=timedelta(days=30))
    assert run(prune()) == 2
    left = {r[0] for r in conn.execute("SELECT id FROM portalq.job_queue")}
    assert left == {recent_done.id, waiting.id}
    for table in ("job_events", "job_documents", "job_artifacts"):
        orphans = conn.execute(f"SELECT count(*) FROM portalq.{table} WHERE job_id = ANY(%s)",
                               ([old_done.id, old_cancelled.id],)).fetchone()[0]
        assert orphans == 0, table
    assert conn.execute("SELECT count(*) FROM portalq.job_events WHERE job_id = %s",
                        (recent_done.id,)).fetchone()[0] == 2    # running, completed
    assert run(prune()) == 0


def test_claim_cancelled_during_rate_checks_puts_its_jobs_back(dsn, conn, frozen):
    """The claim commits first, then checks per-key rate limits job by job; if that is cut
    short (here: a shutdown cancels it while another node holds the key's lock), the
    claimed jobs go back to the queue, not started and the attempt refunded."""
    job = queue.enqueue("obtain_ein", "E1", payloads.OBTAIN_EIN)
    key = conn.execute("SELECT rate_key FROM portalq.job_queue WHERE id = %s", (job.id,)).fetchone()[0]
    day = (T0 - timedelta(hours=12), T0 + timedelta(hours=12))

    async def go():
        async with await _aconn(dsn) as holder, await _aconn(dsn) as c:
            async with holder.transaction():
                await holder.execute("SELECT pg_advisory_xact_lock(726202, hashtext(%s))",
                                     (key,))
                task = asyncio.create_task(worker_api.claim(
                    c, worker="w1", limit=5, capacities=[Capacity("irs_ein", None, day)]))
                while True:   # the claim committed; its rate check now waits for the lock
                    await asyncio.sleep(0.01)
                    if conn.execute("SELECT status FROM portalq.job_queue WHERE id = %s",
                                    (job.id,)).fetchone()[0] == "running":
                        break
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
    run(go())
    row = conn.execute("SELECT status, attempts, started_at, lock_owner FROM portalq.job_queue "
                       "WHERE id = %s", (job.id,)).fetchone()
    assert row == ("pending", 0, None, None)
    events = [e["detail"] for e in queue.show_job(job.id)["events"]]
    assert events[-1] == {"event": "claim undone"}
    assert [j["id"] for j in claim(dsn, portals=("irs_ein",))] == [job.id]   # claimable again


def test_claim_cancelled_while_its_answer_is_in_flight_puts_its_jobs_back(
        dsn, conn, frozen, monkeypatch):
    """A shutdown's cancel can land after the claim statement committed on the server and
    before its rows reached the node (found beside a CPU hog: the job stayed 'running' under
    a node that never got it, until the stale-heartbeat rescue). Here the answer is held at
    a gate after the real statement ran; the cancel comes meanwhile."""
    from portalq.jobs.db import sql

    job = queue.enqueue("name_search", "C1", payloads.NAME_SEARCH)
    real = sql.afetch
    committed, gate = asyncio.Event(), asyncio.Event()

    async def answer_late(c, name, params=None, **kw):
        rows = await real(c, name, params, **kw)
        if name == "claim":
            committed.set()
            await gate.wait()    # the statement is done; its answer has not arrived
        return rows
    monkeypatch.setattr(sql, "afetch", answer_late)

    async def go():
        async with await _aconn(dsn) as c:
            task = asyncio.create_task(worker_api.claim(
                c, worker="w1", limit=5, capacities=[Capacity("bc_corporate_online", None)]))
            await committed.wait()
            assert conn.execute("SELECT status FROM portalq.job_queue WHERE id = %s",
                                (job.id,)).fetchone()[0] == "running"
            task.cancel()
            await asyncio.sleep(0)   # the cancel is delivered while the answer is held
            gate.set()
            with pytest.raises(asyncio.CancelledError):
                await task
    run(go())
    monkeypatch.setattr(sql, "afetch", real)
    row = conn.execute("SELECT status, attempts, started_at, lock_owner FROM portalq.job_queue "
                       "WHERE id = %s", (job.id,)).fetchone()
    assert row == ("pending", 0, None, None)
    assert [j["id"] for j in claim(dsn)] == [job.id]   # claimable again


def test_the_ticks_prune_goes_on_while_batches_come_back_full(dsn, conn, frozen):
    """One batch per tick capped retention at 10,000 jobs a tick (~167 finished jobs/s at
    the default 60 s tick: above that the table grew for good); the tick's prune takes batch
    after batch within its time budget."""
    conn.execute("""INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                                           created_at, updated_at, finished_at)
                    SELECT 'name_search', 'P' || g, 'bc_corporate_online', '{}', 'completed',
                           now(), now(), now(), %s
                    FROM generate_series(1, 25) g""", (clock.now() - timedelta(days=40),))

    async def prune(budget):
        async with await _aconn(dsn) as c:
            return await worker_api.prune_within(c, older_than=timedelta(days=30), limit=10,
                                                 budget_seconds=budget)
    assert run(prune(0)) == 10          # no time left: one batch, as before
    assert run(prune(60)) == 15         # batches of 10 until one comes back short
    assert conn.execute("SELECT count(*) FROM portalq.job_queue").fetchone()[0] == 0


def test_outbox_is_notified_only_when_an_outbox_row_is_written(dsn, frozen):
    """Statements that may write an escalation or a portal notice (a completion, a retry)
    NOTIFY portalq_outbox only when they do: each notification makes the leader read the
    outbox, and a commit that notifies queues behind every other such commit (issue 19)."""
    done = queue.enqueue("name_search", "A", payloads.NAME_SEARCH)
    failing = queue.enqueue("name_search", "B", payloads.NAME_SEARCH)
    [a, b] = claim(dsn)
    assert {a["id"], b["id"]} == {done.id, failing.id}
    jb = a if a["id"] == failing.id else b

    async def go():
        async with await _aconn(dsn) as c:
            heard: list[str] = []
            c.add_notify_handler(lambda n: heard.append(n.payload))
            await worker_api.listen(c)     # the session hears its own commits' notifications
            await worker_api.complete_many(c, worker="w1", results=[(done.id, None)])
            after_completion = list(heard)
            await worker_api.finish_unsuccessful(c, job=jb, worker="w1", status="failed",
                                                 error="boom", escalation=("business", "boom"))
            return after_completion, heard
    after_completion, heard = run(go())
    assert after_completion == []
    assert heard == ["escalations"]
