"""What the ETA estimator reads (issue 41; the estimator is portals/eta/, its loader
scheduler/estimates.py): the jobs not started yet, the running ones, recent run durations
and registry decisions, today's per-key rate counts and the steps of orders still holding
one. Bounded or indexed reads; nothing is written."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, Connection

from portalq.jobs.db import sql
from portalq.jobs.kinds import EscalationKind

Row = dict[str, Any]
#: the completions run durations are measured from (the newest)
DURATION_SAMPLE = 5000


def waiting(conn: Connection[Any]) -> list[Row]:
    return sql.fetch(conn, "eta_waiting")


def running(conn: Connection[Any]) -> list[Row]:
    return sql.fetch(conn, "eta_running")


def held_orders(conn: Connection[Any]) -> list[Row]:
    return sql.fetch(conn, "eta_held_orders")


def durations(conn: Connection[Any], since: datetime) -> list[Row]:
    """(job_type, portal, n, p50, p90 seconds) of the newest completions since ``since``."""
    return sql.fetch(conn, "eta_durations", {"since": since, "limit": DURATION_SAMPLE})


def decisions(conn: Connection[Any], since: datetime) -> list[Row]:
    """(portal, submission, secs) of the registries' decisions recorded in the newest
    completions since ``since``."""
    return sql.fetch(conn, "eta_decisions", {"since": since, "limit": DURATION_SAMPLE})


def rate_used(conn: Connection[Any], day_starts: Mapping[str, datetime]) -> list[Row]:
    """(portal, rate_key, n): jobs started on each portal's day starting at its value."""
    if not day_starts:
        return []
    return sql.fetch(conn, "eta_rate_used", {"portals": list(day_starts),
                                             "day_starts": list(day_starts.values())})


def order(conn: Connection[Any], order_id: str) -> list[Row]:
    return sql.fetch(conn, "eta_order", {"order_id": order_id})


async def awaiting(conn: AsyncConnection[Any]) -> list[Row]:
    return await sql.afetch(conn, "eta_waiting")


async def arunning(conn: AsyncConnection[Any]) -> list[Row]:
    return await sql.afetch(conn, "eta_running")


async def aheld_orders(conn: AsyncConnection[Any]) -> list[Row]:
    return await sql.afetch(conn, "eta_held_orders")


async def adurations(conn: AsyncConnection[Any], since: datetime) -> list[Row]:
    return await sql.afetch(conn, "eta_durations", {"since": since, "limit": DURATION_SAMPLE})


async def adecisions(conn: AsyncConnection[Any], since: datetime) -> list[Row]:
    return await sql.afetch(conn, "eta_decisions", {"since": since, "limit": DURATION_SAMPLE})


async def arate_used(conn: AsyncConnection[Any], day_starts: Mapping[str, datetime],
                     ) -> list[Row]:
    if not day_starts:
        return []
    return await sql.afetch(conn, "eta_rate_used", {
        "portals": list(day_starts), "day_starts": list(day_starts.values())})


async def aescalate(conn: AsyncConnection[Any], job_id: int, attempt: int, reason: str,
                    now: datetime) -> int:
    """An ``at_risk`` escalation for the job's attempt: 1 if new, 0 if it was made before."""
    row = await sql.afetch_one(conn, "insert_escalation", {
        "job_id": job_id, "attempt": attempt, "kind": EscalationKind.AT_RISK,
        "reason": reason, "now": now})
    return 1 if row else 0


__all__ = ["DURATION_SAMPLE", "adecisions", "adurations", "aescalate", "aheld_orders",
           "arate_used", "arunning", "awaiting", "decisions", "durations", "held_orders",
           "order", "rate_used", "running", "waiting"]
