"""The live view's worker side: a running job's browser context is screencast
(portals/flows/live.py: masked in the page) and each frame written to ``live_frames``
(one row per job, the newest frame), which tells the consoles on ``portalq_live``.

Why through PostgreSQL: the console runs in another process, maybe on another host, and
the database is what both already reach, with their credentials and no port of the
worker's to open, find or authenticate. A frame is a JPEG of 20-80 kB: too big for a
notification (8000 bytes), so the row holds it and the notification names it. At most
:data:`portals.flows.live.MAX_FPS` frames a second per job, only while its page changes;
docs/takeover.md has the measured latency.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from portalq.jobs.operations import live_view
from portalq.portals.flows.live import Frame, Screencast

if TYPE_CHECKING:
    from portalq.jobs.db.pool import Pool

log = logging.getLogger("portalq.live")


async def cast(context: Any, job_id: int, secrets: Iterable[str], pool: Pool) -> None:
    """Screencast ``context`` to the consoles until it closes. Best effort: the live view
    never decides an outcome."""
    async def publish(frame: Frame) -> None:
        async with pool.connection() as conn:
            await live_view.put_frame(conn, job_id, jpeg=frame.jpeg, taken_at=frame.taken_at,
                                      width=frame.width, height=frame.height, url=frame.url)

    screencast = Screencast(context, secrets, publish)

    async def closed(*_: object) -> None:
        await screencast.stop()
        with contextlib.suppress(Exception):
            async with pool.connection() as conn:
                await live_view.drop_frame(conn, job_id)

    try:
        await screencast.start()
    except Exception as exc:  # noqa: BLE001 - the live view never decides an outcome
        log.info("no live view of job %s: %s", job_id, str(exc).splitlines()[0][:200])
        return
    context.on("close", closed)
