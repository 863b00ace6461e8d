"""Holding a stopped flow's browser for a person (issue 51): a flow that meets a page it
does not know (``PortalChanged``, the drift stop) keeps its browser context, live in the
console, for ``PORTALQ_BROWSER_HOLD_SECONDS``; the job shows "a person can take over". An
operator takes the page over from the console (scheduler/console/live_view.py) and hands it
back; or the hold expires. Either way the job then goes on as the stop says: to the people
queue with its evidence (the drift stop's aria snapshots and screenshot), the hold's
start and end in the audit log.

Bounded: at most ``PORTALQ_HELD_BROWSERS`` held at once per node (each keeps a worker
busy and its context's memory, docs/takeover.md); a stop beyond that goes to the people
queue at once. One held per portal account at a time follows from the account itself: a
job holds its account until it ends, so a second job of that account waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from portalq.jobs import clock
from portalq.jobs.operations import live_view
from portalq.scheduler import live_frames

if TYPE_CHECKING:
    from portalq.jobs.db.pool import Pool

log = logging.getLogger("portalq.live")

#: the jobs whose browsers this process holds now
_held: set[int] = set()


async def hold(job_id: int, pool: Pool, step: Callable[[str], Awaitable[None]], *,
               seconds: float, limit: int, why: str) -> str | None:
    """Keep the job's browser for a person, until handed back or ``seconds``; what ended
    it: "handed back by NAME", "expired", or why it was not held; None when holding is
    off (nothing to say)."""
    if seconds <= 0:
        return None
    screencast = live_frames.casting(job_id)
    if screencast is None:
        return "not held (no live view of the page)"
    if len(_held) >= limit:
        return f"not held (this node already holds {len(_held)} browsers)"
    _held.add(job_id)
    try:
        until = clock.now() + timedelta(seconds=seconds)
        await step(f"held: a person can take over until {until:%H:%M:%S} UTC")
        await _audit(pool, job_id, "hold the browser", f"{why}; held for a person until "
                     f"{until:%Y-%m-%d %H:%M:%S} UTC")
        try:
            await asyncio.wait_for(screencast.handed_back.wait(), seconds)
            ended = f"handed back by {screencast.handed_back_by}"
        except TimeoutError:
            ended = "expired"
        await _audit(pool, job_id, "release the browser", f"hold {ended}")
        return ended
    finally:
        _held.discard(job_id)


async def _audit(pool: Pool, job_id: int, action: str, reason: str) -> None:
    with contextlib.suppress(Exception):   # the audit row is not worth failing the job for
        async with pool.connection() as conn:
            await live_view.audit(conn, job_id, action, reason[:2000])
