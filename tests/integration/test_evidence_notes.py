"""A note the tracer wrote beside a kept file (a trace's untraced stretches, issue 48 #14)
is recorded as that artifact's note, and the notes file is not itself evidence."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg

from portalq.jobs import queue
from portalq.jobs.db.pool import make_pool
from portalq.portals.flows.browser import note_evidence
from portalq.scheduler import evidence
from portalq.scheduler.node_db import Database
from tests import payloads


def test_a_trace_note_is_recorded_with_its_artifact(db, dsn, tmp_path: Path):
    job_id = queue.enqueue("obtain_ein", "ORD-N", payloads.OBTAIN_EIN).id
    folder = tmp_path / "attempt-1"
    folder.mkdir()
    (folder / "trace.zip").write_bytes(b"zip")
    (folder / "01-form.png").write_bytes(b"png")
    note_evidence(folder, folder / "trace.zip", "not traced: 1 stretch")

    async def save() -> None:
        pool = make_pool(dsn, max_size=2, options={}, reconnect_cap=1.0)
        await pool.open()
        try:
            await evidence.save(Database(pool, 1.0), {"id": job_id, "attempts": 1}, folder,
                                lease_fresh=True)
        finally:
            await pool.close()

    asyncio.run(save())
    with psycopg.connect(dsn) as c:
        rows = c.execute("SELECT kind, path, note FROM portalq.job_artifacts WHERE job_id = %s "
                         "ORDER BY path", (job_id,)).fetchall()
    assert [(k, Path(p).name, n) for k, p, n in rows] == [
        ("screenshot", "01-form.png", None), ("trace", "trace.zip", "not traced: 1 stretch")]
