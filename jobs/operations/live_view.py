"""The live view's frames in the database (``live_frames``): the worker running a browser
job writes its newest masked frame (scheduler/live_frames.py), the console reads it when
``portalq_live`` says there is a new one (scheduler/console/live_view.py)."""

from __future__ import annotations

from typing import Any

from portalq.jobs import clock
from portalq.jobs.db import sql


async def put_frame(conn: Any, job_id: int, *, jpeg: bytes, taken_at: float, width: int,
                    height: int, url: str) -> None:
    await sql.afetch(conn, "live_frame_put", {
        "job_id": job_id, "taken_at": taken_at, "now": clock.now(), "width": width,
        "height": height, "url": url[:500], "jpeg": jpeg})


async def drop_frame(conn: Any, job_id: int) -> None:
    await sql.afetch(conn, "live_frame_drop", {"job_id": job_id})


def frame(conn: Any, job_id: int) -> dict[str, Any] | None:
    """The job's newest frame (None: no browser of the job is being shown)."""
    return sql.fetch_one(conn, "live_frame_get", {"job_id": job_id})
