"""The live view's frames in the database (``live_frames``): the worker running a browser
job writes its newest masked frame (scheduler/live_frames.py), the console reads it when
``portalq_live`` says there is a new one (scheduler/console/live_view.py)."""

from __future__ import annotations

import json
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


def watch(conn: Any, job_id: int) -> None:
    """Someone watches the job's page: its worker casts it (renew within 30 s)."""
    sql.fetch(conn, "live_watch", {"job_id": job_id})


def take(conn: Any, job_id: int, user: str) -> bool:
    """``user`` holds the job's page (False: it is not live, or another user holds it)."""
    return sql.fetch_one(conn, "live_take", {"job_id": job_id, "user": user,
                                             "now": clock.now()}) is not None


def release(conn: Any, job_id: int, user: str) -> bool:
    return sql.fetch_one(conn, "live_release", {"job_id": job_id, "user": user}) is not None


def holder(conn: Any, job_id: int) -> str | None:
    row = sql.fetch_one(conn, "live_holder", {"job_id": job_id})
    return str(row["holder"]) if row and row["holder"] else None


def send_input(conn: Any, job_id: int, user: str, event: dict[str, Any]) -> bool:
    """Send one input event to the worker driving the page; False if ``user`` does not
    hold it."""
    payload = json.dumps({"job": job_id, **event})
    return bool(sql.fetch(conn, "live_input", {"job_id": job_id, "user": user,
                                               "event": payload}))


async def audit(conn: Any, job_id: int, action: str, reason: str) -> None:
    """The service's own row in the audit log (a browser held for a person, released)."""
    await sql.afetch(conn, "live_audit", {"now": clock.now(), "job_id": job_id,
                                          "action": action, "reason": reason})
