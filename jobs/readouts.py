"""Read-outs of the job queue for the live views (``portalq status``, ``/metrics``):
depth by portal and status, running, deferred and failed jobs. Bounded queries; the
queue's writes are in :mod:`jobs.queue` (admin, enqueue) and :mod:`jobs.worker_api`."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, Connection

from portalq.jobs.db import sql

Row = dict[str, Any]


def depth(conn: Connection[Any]) -> list[Row]:
    """(portal, status, n) rows."""
    return sql.fetch(conn, "count_by_portal_status")


async def adepth(conn: AsyncConnection[Any]) -> list[Row]:
    return await sql.afetch(conn, "count_by_portal_status")


def running(conn: Connection[Any]) -> list[Row]:
    """Running jobs, oldest first, with their current step (at most 20)."""
    return sql.fetch(conn, "status_running")


def deferred(conn: Connection[Any]) -> list[Row]:
    """Deferred jobs, soonest first (at most 10)."""
    return sql.fetch(conn, "status_deferred")


def recent_failures(conn: Connection[Any]) -> list[Row]:
    """Failed jobs, newest first, and whether their escalation went out (at most 10)."""
    return sql.fetch(conn, "status_failures")
