"""The live view's worker side: a running job's browser context is screencast
(portals/flows/live.py: masked in the page) and each frame written to ``live_frames``
(one row per job, the newest frame), which tells the consoles on ``portalq_live``; the
input of the person holding the page (a takeover) comes back on ``portalq_live_input``.

Why through PostgreSQL: the console runs in another process, maybe on another host, and
the database is what both already reach, with their credentials and no port of the
worker's to open, find or authenticate. A frame is a JPEG of 20-80 kB: too big for a
notification (8000 bytes), so the row holds it and the notification names it. Only while
a console page watches the job (it says so on ``portalq_live_input``), at most
:data:`portals.flows.live.MAX_FPS` frames a second, only while its page changes;
docs/takeover.md has the measured latency. One LISTEN session per worker process for the
input, open while any of its jobs' pages is cast.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from portalq.jobs.db import connections
from portalq.jobs.kinds import Channel
from portalq.jobs.operations import live_view
from portalq.portals.flows.live import Frame, Screencast

if TYPE_CHECKING:
    from portalq.jobs.db.pool import Pool

log = logging.getLogger("portalq.live")

#: the pages this process casts, by job id (the input listener's addressees)
_casts: dict[int, Screencast] = {}
_listener: list[asyncio.Task[None]] = []


async def cast(context: Any, job_id: int, secrets: Iterable[str], pool: Pool) -> None:
    """Screencast ``context`` to the consoles until it closes, and take the input of
    whoever holds it. Best effort: the live view never decides an outcome."""
    async def publish(frame: Frame) -> None:
        async with pool.connection() as conn:
            await live_view.put_frame(conn, job_id, jpeg=frame.jpeg, taken_at=frame.taken_at,
                                      width=frame.width, height=frame.height, url=frame.url)

    screencast = Screencast(context, secrets, publish, on_demand=True)

    async def closed(*_: object) -> None:
        if _casts.get(job_id) is screencast:
            del _casts[job_id]
        if not _casts:
            _stop_listening()
        await screencast.stop()
        with contextlib.suppress(Exception):
            async with pool.connection() as conn:
                await live_view.drop_frame(conn, job_id)

    try:
        await screencast.start()
    except Exception as exc:  # noqa: BLE001 - the live view never decides an outcome
        log.info("no live view of job %s: %s", job_id, str(exc).splitlines()[0][:200])
        return
    _casts[job_id] = screencast
    if not _listener or _listener[0].done():
        _listener[:] = [asyncio.ensure_future(_listen(str(pool.conninfo)))]
    context.on("close", closed)


def casting(job_id: int) -> Screencast | None:
    """The screencast of the job's page in this process, if it is cast."""
    return _casts.get(job_id)


def _stop_listening() -> None:
    for task in _listener:
        task.cancel()
    _listener.clear()


async def _listen(dsn: str) -> None:
    delay = 0.2
    while True:
        try:
            async with connections.listening(dsn, (Channel.LIVE_INPUT,)) as heard:
                delay = 0.2
                async for note in heard:
                    await _dispatch(note.payload)
        except connections.LOST as exc:
            log.warning("live input listener lost the database (%s)", exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


async def _dispatch(payload: str) -> None:
    try:
        event = json.loads(payload)
        screencast = _casts.get(int(event["job"]))
        if screencast is not None:
            await screencast.input(event)
    except Exception as exc:  # noqa: BLE001 - one bad event must not end the input
        log.info("live input not applied: %s", str(exc).splitlines()[0][:200] if str(exc)
                 else type(exc).__name__)
