"""Typed results (issue 50): a job type may declare what its flow returns as a model
(``JobType(..., result_model=M)``). The worker stores the model's JSON form, and a flow may
return the model itself. A result its model refuses is kept as the flow gave it -- past a
submission the work is done, and failing the job would send it round again -- and the
refusal is logged by field, never by value. An in-process worker on the real server."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import psycopg
from pydantic import BaseModel

from portalq.jobs import queue, types
from portalq.scheduler.config import Settings
from portalq.scheduler.handlers import register_handler
from tests.service_helpers import add_local_portal, worker_in_process

JOB_TYPE = "typed_result_probe"
FILED = datetime(2026, 12, 8, 1, 30, tzinfo=UTC)


class Ask(BaseModel):
    give: str


class Filed(BaseModel):
    number: str
    filed_at: datetime
    pages: int = 1


async def _flow(ctx: Any) -> Any:
    give = ctx.payload["give"]
    if give == "model":
        return Filed(number="BC1234567", filed_at=FILED)
    if give == "dict":
        return {"number": "BC7654321", "filed_at": FILED.isoformat(), "pages": "3"}
    return {"number": 42, "secret": "123-45-6789"}   # not a Filed: no filed_at, a number


types.register(types.JobType(JOB_TYPE, Ask, "local", result_model=Filed))
register_handler(JOB_TYPE, _flow)


def _results(db: str, dsn: str, ids: list[int], deadline: float = 20) -> dict[int, Any]:
    async def go() -> None:
        settings = Settings(database_url=db, node_id="w1", workers=3, poll_seconds=0.05)
        async with worker_in_process(settings, dsn):
            async with asyncio.timeout(deadline):
                while _completed(dsn, ids) < len(ids):
                    await asyncio.sleep(0.05)
    asyncio.run(go())
    with psycopg.connect(dsn) as c:
        return dict(c.execute("SELECT id, result FROM portalq.job_queue WHERE id = ANY(%s)",
                              (ids,)).fetchall())


def _completed(dsn: str, ids: list[int]) -> int:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM portalq.job_queue WHERE id = ANY(%s) "
                         "AND status = 'completed'", (ids,)).fetchone()[0]


def test_a_result_is_stored_as_its_models_json(db, dsn):
    add_local_portal(dsn)
    model, plain = (queue.enqueue(JOB_TYPE, f"O-{g}", {"give": g}).id for g in ("model", "dict"))
    results = _results(db, dsn, [model, plain])
    assert results[model] == {"number": "BC1234567", "filed_at": "2026-12-08T01:30:00Z",
                              "pages": 1}
    # a dict the model accepts is stored as the model reads it (the page count a number)
    assert results[plain] == {"number": "BC7654321", "filed_at": "2026-12-08T01:30:00Z",
                              "pages": 3}


def test_a_result_its_model_refuses_is_kept_and_named_by_field(db, dsn, caplog):
    add_local_portal(dsn)
    job = queue.enqueue(JOB_TYPE, "O-bad", {"give": "bad"}).id
    with caplog.at_level(logging.WARNING):
        results = _results(db, dsn, [job])
    assert results[job] == {"number": 42, "secret": "123-45-6789"}
    [warning] = [r for r in caplog.records if "does not fit" in r.getMessage()]
    text = warning.getMessage()
    assert "Filed" in text and "filed_at" in text and "number" in text
    assert "123-45-6789" not in text and "input" not in text   # no value of the result
