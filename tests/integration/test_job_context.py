"""A job's context is built from narrow parts (a pool, the node's name, settings, a
browser opener, a lease check) -- no Worker -- and keeps the submission guard: a node
whose lease is stale writes no checkpoint, and a job taken away refuses its writes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest

from portalq.jobs import queue, worker_api
from portalq.jobs.worker_api import Capacity
from portalq.scheduler.config import Settings
from portalq.scheduler.job_context import JobContext, LostJob
from portalq.scheduler.node_db import make_pool
from tests.service_helpers import add_local_portal


def test_a_context_without_a_worker_guards_its_checkpoints(db, dsn, tmp_path):
    import tests.plugins.ledger  # noqa: F401 - registers ledger_job

    add_local_portal(dsn)
    job = queue.enqueue("ledger_job", "O1", {"fail_times": 0})
    opened: list[tuple[str, Path]] = []

    async def opener(portal: str, folder: Path) -> Any:
        opened.append((portal, folder))
        raise RuntimeError("no browser in this test")

    async def go() -> None:
        settings = Settings(database_url=db, node_id="w1")
        pool = make_pool(settings, dsn)
        await pool.open(wait=True)
        try:
            async with pool.connection() as c:
                [claimed] = await worker_api.claim(c, worker="w1", limit=1,
                                                   capacities=[Capacity("local", None)])
            fresh = {"ok": True}
            ctx = JobContext(claimed, tmp_path / "attempt-1", pool=pool, node="w1",
                             settings=settings, browsers=opener,
                             lease_fresh=lambda _job_id: fresh["ok"])
            await ctx.save_checkpoint(stage="submitting", reference="R-1")
            assert ctx.checkpoints["stage"] == "submitting"
            fresh["ok"] = False   # the heartbeat could not be renewed: no submission
            with pytest.raises(LostJob, match="lease is stale"):
                await ctx.save_checkpoint(stage="confirmed")
            fresh["ok"] = True
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
                await c.execute("UPDATE portalq.job_queue SET lock_owner = 'w2' WHERE id = %s",
                                (job.id,))   # rescued and handed to another node
            with pytest.raises(LostJob, match="no longer held"):
                await ctx.save_checkpoint(stage="confirmed")
            with pytest.raises(RuntimeError, match="no browser"):
                await ctx.new_browser_context()
        finally:
            await pool.close()

    asyncio.run(go())
    assert queue.get_job(job.id)["checkpoint"]["stage"] == "submitting"
    assert opened == [("local", tmp_path / "attempt-1")]
    assert (tmp_path / "attempt-1").is_dir()


def test_a_job_claimed_again_while_its_earlier_run_here_is_still_ending_is_given_back(
        db, dsn):
    """Found with a partition: the node's fenced run of a job is still unwinding when the
    job, rescued meanwhile, is claimed again by the same node. Started, the new run would
    lose its slot and lease to the old run's end and could file a second time unfenced.
    It is given back instead (attempt refunded) until the old run has ended."""
    import tests.plugins.ledger  # noqa: F401 - registers ledger_job
    from portalq.scheduler.worker import Worker

    add_local_portal(dsn)
    job = queue.enqueue("ledger_job", "O1", {})

    async def go() -> None:
        settings = Settings(database_url=db, node_id="w1")
        pool = make_pool(settings, dsn)
        await pool.open(wait=True)
        worker = Worker(settings, pool, dsn)
        old_run = asyncio.get_running_loop().create_future()   # the fenced run, ending
        worker.running[job.id] = old_run  # type: ignore[assignment]
        try:
            async with pool.connection() as c:
                claimed = await worker_api.claim(c, worker="w1", limit=1,
                                                 capacities=[Capacity("local", None)])
                assert [j["id"] for j in claimed] == [job.id]
                assert await worker._not_running_here(c, claimed) == []
            assert worker.running[job.id] is old_run   # its slot is the old run's still
        finally:
            old_run.cancel()
            await pool.close()

    asyncio.run(go())
    row = queue.get_job(job.id)
    assert (row["status"], row["attempts"], row["lock_owner"]) == ("pending", 0, None)


def test_a_fourth_question_after_three_unanswered_goes_to_a_human(db, dsn):
    """A flow asking a person (an e-mailed code) three times without an answer is not asked
    again: the job goes to a human (a business error) instead of waiting forever."""
    from datetime import timedelta

    from portalq.jobs import clock
    from portalq.jobs.errors import BusinessError
    from portalq.scheduler.people import Asker

    add_local_portal(dsn)
    job = queue.enqueue("ledger_job", "O1", {})
    past = clock.now() - timedelta(hours=1)
    with psycopg.connect(dsn, autocommit=True) as c:
        for attempt in (1, 2, 3):
            c.execute("INSERT INTO portalq.job_questions (job_id, attempt, question, asked_at, deadline)"
                      " VALUES (%s, %s, 'the code?', %s, %s)", (job.id, attempt, past, past))

    async def go() -> None:
        settings = Settings(database_url=db, node_id="w1")
        pool = make_pool(settings, dsn)
        await pool.open(wait=True)
        try:
            with pytest.raises(BusinessError, match="3 questions to a person went unanswered"):
                await Asker(pool, job_id=job.id, attempt=4).ask("the code?")
        finally:
            await pool.close()

    asyncio.run(go())
    with psycopg.connect(dsn) as c:   # no fourth question was asked
        assert c.execute("SELECT count(*) FROM portalq.job_questions").fetchone()[0] == 3


def test_args_is_the_job_types_payload_model_with_its_secrets_opened(db, dsn, tmp_path):
    """``ctx.args`` (issue 40): the flow gets its type's model, not a dict -- validated,
    its sealed secret field opened in memory; the stored row keeps it sealed."""
    from tests.plugins import ledger

    add_local_portal(dsn)
    job = queue.enqueue("ledger_secret", "S1", {"n": 7, "ssn": ledger.secret_ssn(7)})
    assert ledger.secret_ssn(7) not in str(queue.get_job(job.id)["payload"])

    async def opener(portal: str, folder: Path) -> Any:
        raise RuntimeError("no browser in this test")

    async def go() -> Any:
        settings = Settings(database_url=db, node_id="w1")
        pool = make_pool(settings, dsn)
        await pool.open(wait=True)
        try:
            async with pool.connection() as c:
                [claimed] = await worker_api.claim(c, worker="w1", limit=1,
                                                   capacities=[Capacity("local", None)])
            return JobContext(claimed, tmp_path, pool=pool, node="w1", settings=settings,
                              browsers=opener).args
        finally:
            await pool.close()

    args = asyncio.run(go())
    assert isinstance(args, ledger.SecretPayload)
    assert (args.n, args.ssn, args.sleep_ms) == (7, ledger.secret_ssn(7), 0)
