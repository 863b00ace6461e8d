"""Orders as pipelines (issue 41) on the real queue, with the small job types of
tests/plugins/order_steps.py: an order's jobs are created at once (first steps pending, the
others held where no claim reaches them); a step's completion releases the steps after it
with payloads built from the results (secrets sealed, never copied into the clear); a failed
step holds them until a person retries it; cancelling cancels only what has not run."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

import tests.plugins.order_steps  # noqa: F401 - registers test_llc and its job types
from portalq.jobs import clock, queue, worker_api
from portalq.jobs.business import order_runs
from portalq.jobs.errors import IllegalTransition, InputError, JobNotFound
from portalq.jobs.secrets import sealing as secrets_at_rest
from portalq.jobs.worker_api import Capacity
from tests.service_helpers import add_local_portal

ORDER = {"legal_name": "Tanaka Robotics LLC", "ssn": "512-34-8890", "email": "mei@example.com"}
FILED = {"entity_name": "TANAKA ROBOTICS LLC", "file_number": "7345123"}


def _claim(dsn: str, worker: str = "w1") -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            rows = await worker_api.claim(c, worker=worker, limit=10,
                                          capacities=[Capacity("local", None)])
            return [dict(r) for r in rows]
    return asyncio.run(go())


def _complete(dsn: str, job_id: int, result: dict[str, Any], worker: str = "w1") -> set[int]:
    async def go() -> set[int]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await worker_api.complete_many(c, worker=worker, results=[(job_id, result)])
    return asyncio.run(go())


def _fail(dsn: str, job: dict[str, Any], worker: str = "w1") -> None:
    async def go() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            assert await worker_api.finish_unsuccessful(
                c, job=job, worker=worker, status="failed", error="the registry said no",
                escalation=("business", "the registry said no"))
    asyncio.run(go())


def _sweep(dsn: str) -> list[int]:
    async def go() -> list[int]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await order_runs.arelease_held(c)
    return asyncio.run(go())


def _statuses(order_id: str) -> dict[str, str]:
    return {s["step"]: s["status"] for s in order_runs.order_steps(order_id)}


def _counts(conn: psycopg.Connection[Any]) -> tuple[int, int, int]:
    return conn.execute("SELECT (SELECT count(*) FROM portalq.orders), "
                        "(SELECT count(*) FROM portalq.order_steps), "
                        "(SELECT count(*) FROM portalq.job_queue)").fetchone()  # type: ignore


def test_an_order_is_created_whole_its_later_steps_held_out_of_every_claim(db, dsn, conn):
    add_local_portal(dsn)
    created = order_runs.enqueue_order("test_llc", "ORD-1001", ORDER)
    assert created.started == ("file",) and set(created.jobs) == {"file", "ein", "deliver"}
    assert _statuses("ORD-1001") == {"file": "pending", "ein": "deferred",
                                     "deliver": "deferred"}
    held = queue.get_job(created.jobs["ein"])
    assert held["run_at"] == order_runs.HELD_UNTIL and held["payload"] == {}
    assert held["last_error"] == "waiting for file (order ORD-1001)"
    # the order's input is sealed: the SSN is nowhere in clear
    raw = conn.execute("SELECT input_data FROM portalq.orders").fetchone()[0]
    assert raw is not None and b"512-34-8890" not in bytes(raw)
    dump = conn.execute("SELECT string_agg(payload::text || coalesce(last_error, ''), ' ') "
                        "FROM portalq.job_queue").fetchone()[0]
    assert "8890" not in dump
    # a claim years from now still takes only the first step
    clock.set_clock(lambda: order_runs.HELD_UNTIL.replace(year=2999))
    assert [j["id"] for j in _claim(dsn)] == [created.jobs["file"]]


def test_each_completion_releases_the_next_step_built_from_the_results(db, dsn, conn):
    add_local_portal(dsn)
    created = order_runs.enqueue_order("test_llc", "ORD-1002", ORDER)
    [filing] = _claim(dsn)
    assert _complete(dsn, filing["id"], FILED) == {filing["id"]}
    assert _statuses("ORD-1002") == {"file": "completed", "ein": "pending",
                                     "deliver": "deferred"}
    ein = queue.get_job(created.jobs["ein"])
    # the EIN step got the filed entity's data; its SSN sealed, not in the stored payload
    assert ein["payload"]["legal_name"] == "TANAKA ROBOTICS LLC"
    assert ein["payload"]["file_number"] == "7345123"
    assert ein["payload"]["ssn"] == secrets_at_rest.MARKER and ein["secret_data"] is not None
    assert secrets_at_rest.reveal(ein)["ssn"] == "512-34-8890"
    assert ein["run_at"] <= clock.now()
    [claimed] = _claim(dsn)
    assert claimed["id"] == ein["id"]
    _complete(dsn, ein["id"], {"ein": "12-3456789", "documents": ["cp575.pdf"]})
    deliver = queue.get_job(created.jobs["deliver"])
    assert deliver["status"] == "pending"
    assert deliver["payload"] == {"to": "mei@example.com",
                                  "source_job_ids": [filing["id"], ein["id"]]}
    # no step waits for the input any more: erased
    row = conn.execute("SELECT input_data, input_erased_at FROM portalq.orders").fetchone()
    assert row[0] is None and row[1] is not None
    events = conn.execute("SELECT from_status, to_status FROM portalq.job_events "
                          "WHERE job_id = %s ORDER BY id", (ein["id"],)).fetchall()
    assert events[0] == ("deferred", "pending")


def test_a_failed_step_holds_the_steps_after_it_until_a_person_retries_it(db, dsn):
    add_local_portal(dsn)
    created = order_runs.enqueue_order("test_llc", "ORD-1003", ORDER)
    [filing] = _claim(dsn)
    _fail(dsn, filing)
    assert _sweep(dsn) == []   # the leader's sweep finds nothing to release
    assert _statuses("ORD-1003") == {"file": "failed", "ein": "deferred",
                                     "deliver": "deferred"}
    assert queue.get_job(created.jobs["ein"])["run_at"] == order_runs.HELD_UNTIL
    queue.retry(filing["id"], actor="tester", note="the registry fixed its form")
    [again] = _claim(dsn)
    assert again["id"] == filing["id"]
    _complete(dsn, filing["id"], FILED)
    assert _statuses("ORD-1003")["ein"] == "pending"


def _tick(db: str, dsn: str, tmp_path: Any) -> dict[str, int]:
    from portalq.scheduler.config import Settings
    from portalq.scheduler.tick import Tick
    from portalq.scheduler.worker import Worker, make_pool

    settings = Settings(database_url=db, artifacts_dir=tmp_path / "a", node_id="leader")

    async def go() -> dict[str, int]:
        pool = make_pool(settings, dsn)
        await pool.open(wait=True)
        try:
            worker = Worker(settings, pool, dsn)
            await worker.refresh_portals()
            return await Tick(settings, worker, dsn).duties()
        finally:
            await pool.close()
    return asyncio.run(go())


def test_a_release_lost_to_a_crash_is_made_by_the_leaders_sweep(db, dsn, conn, tmp_path):
    add_local_portal(dsn)
    created = order_runs.enqueue_order("test_llc", "ORD-1004", ORDER)
    # the completion committed, the node died before the release
    conn.execute("UPDATE portalq.job_queue SET status = 'completed', result = %s::jsonb "
                 "WHERE id = %s", ('{"entity_name": "X LLC", "file_number": "1"}',
                                   created.jobs["file"]))
    assert _tick(db, dsn, tmp_path)["order_steps_released"] == 1   # the leader's sweep
    assert queue.get_job(created.jobs["ein"])["payload"]["legal_name"] == "X LLC"
    assert _sweep(dsn) == []   # once


def test_cancelling_an_order_cancels_only_what_has_not_run(db, dsn):
    add_local_portal(dsn)
    created = order_runs.enqueue_order("test_llc", "ORD-1005", ORDER)
    [filing] = _claim(dsn)
    _complete(dsn, filing["id"], FILED)
    [ein] = _claim(dsn)   # running at the portal
    assert order_runs.cancel_order("ORD-1005", reason="client withdrew") == [
        created.jobs["deliver"]]
    assert _statuses("ORD-1005") == {"file": "completed", "ein": "running",
                                     "deliver": "cancelled"}
    _complete(dsn, ein["id"], {"ein": "12-3456789"})   # the running step ends as it may
    assert _statuses("ORD-1005") == {"file": "completed", "ein": "completed",
                                     "deliver": "cancelled"}
    with pytest.raises(IllegalTransition, match="cancelled already"):
        order_runs.cancel_order("ORD-1005", reason="again")
    with pytest.raises(JobNotFound, match="no order"):
        order_runs.cancel_order("ORD-404", reason="x")


def test_cancelling_leaves_a_step_whose_filing_awaits_the_registry(db, dsn, conn):
    add_local_portal(dsn)
    created = order_runs.enqueue_order("test_llc", "ORD-1010", ORDER)
    # the filing was submitted and waits for staff (a registry that decides later)
    conn.execute("""UPDATE portalq.job_queue SET status = 'deferred', attempts = 1,
                    checkpoint = '{"submissions": {"formation": {"state": "confirmed",
                    "confirmation": {"service_request": "SR-1"}}}}'::jsonb WHERE id = %s""",
                 (created.jobs["file"],))
    assert sorted(order_runs.cancel_order("ORD-1010", reason="client withdrew")) == sorted(
        [created.jobs["ein"], created.jobs["deliver"]])
    assert _statuses("ORD-1010") == {"file": "deferred", "ein": "cancelled",
                                     "deliver": "cancelled"}


def test_cancelling_before_anything_ran_cancels_every_step(db, dsn, conn):
    add_local_portal(dsn)
    created = order_runs.enqueue_order("test_llc", "ORD-1006", ORDER)
    assert sorted(order_runs.cancel_order("ORD-1006", reason="duplicate")) == sorted(
        created.jobs.values())
    assert _claim(dsn) == []
    assert conn.execute("SELECT input_data FROM portalq.orders").fetchone()[0] is None


@pytest.mark.parametrize(("kind", "data", "message"), [
    ("no_such_kind", ORDER, "unknown order kind 'no_such_kind'"),
    ("test_llc", {**ORDER, "ssn": "12"}, "invalid test_llc order input: ssn"),
    ("test_llc", [1], "test_llc order input must be a JSON object"),
    ("test_leaky", ORDER, "step file would store the order's secret ssn"),
])
def test_bad_input_is_one_error_and_writes_nothing(db, dsn, conn, kind, data, message):
    add_local_portal(dsn)
    with pytest.raises(InputError, match=message):
        order_runs.enqueue_order(kind, "ORD-1007", data)
    assert _counts(conn) == (0, 0, 0)


def test_an_order_id_is_used_once(db, dsn, conn):
    add_local_portal(dsn)
    order_runs.enqueue_order("test_llc", "ORD-1008", ORDER)
    with pytest.raises(InputError, match="order 'ORD-1008' already exists"):
        order_runs.enqueue_order("test_llc", "ORD-1008", ORDER)
    assert _counts(conn) == (1, 3, 3)


def test_an_order_is_part_of_the_callers_transaction(db, dsn):
    add_local_portal(dsn)
    with psycopg.connect(dsn) as c:
        order_runs.enqueue_order("test_llc", "ORD-1009", ORDER, conn=c)
        assert len(order_runs.order_steps("ORD-1009", conn=c)) == 3
        c.rollback()
    assert order_runs.order_steps("ORD-1009") == []
    with psycopg.connect(dsn) as c:
        order_runs.enqueue_order("test_llc", "ORD-1009", ORDER, conn=c)
    assert len(order_runs.order_steps("ORD-1009")) == 3


def test_a_waiting_orders_sealed_input_is_rotated_and_keeps_its_key_from_retiring(
        db, dsn, tmp_path):
    from portalq.jobs.secrets import crypto
    from portalq.jobs.secrets import rotation as keys

    add_local_portal(dsn)
    ring = crypto.FileKeyring(tmp_path / "keys.json", create=True)
    crypto.set_provider(ring)
    try:
        old = ring.current_id()
        created = order_runs.enqueue_order("test_llc", "ORD-1011", ORDER)
        with queue.connect() as c:
            assert keys.usage(c) == {old: 1}   # the order's input: retire would refuse
        new = ring.add_current()
        report = keys.rewrap_all(queue.connect, ring)
        assert report.order_inputs == 1
        with queue.connect() as c:
            assert keys.usage(c) == {new: 1}
        keys.retire(queue.connect, old, ring)
        [filing] = _claim(dsn)
        _complete(dsn, filing["id"], FILED)   # the input opens under the new key
        ein = queue.get_job(created.jobs["ein"])
        assert ein["status"] == "pending"
        assert secrets_at_rest.reveal(ein)["ssn"] == "512-34-8890"
    finally:
        crypto.set_provider(None)


def test_a_step_confirmed_filed_by_a_person_releases_the_next_at_once_or_fails_it_for_one(
        db, dsn, conn):
    add_local_portal(dsn)
    created = order_runs.enqueue_order("test_llc", "ORD-1012", ORDER)
    [filing] = _claim(dsn)
    _fail(dsn, filing)
    # a person found the filing on the portal; its result has no entity data to build from
    queue.resolve_filed(filing["id"], "7345123", actor="tester")
    ein = queue.get_job(created.jobs["ein"])
    assert ein["status"] == "failed", ein["last_error"]
    assert ein["last_error"] == ("order step not started: order kind test_llc: step ein "
                                 "could not build its payload: KeyError")
    assert conn.execute("SELECT kind FROM portalq.escalations WHERE job_id = %s",
                        (ein["id"],)).fetchall() == [("business",)]
    assert _statuses("ORD-1012")["deliver"] == "deferred"   # still waits for the EIN
