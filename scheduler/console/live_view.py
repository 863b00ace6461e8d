"""The live view of a running browser job on its console page: the frames the worker
writes (``live_frames``, masked in the page: portals/flows/live.py) streamed to the page
as server-sent events, which draws them on a canvas (static/live_view.js).

One LISTEN session per console process on ``portalq_live``, opened when the first page
watches; a notification names a job and its frame's number, and the frame is read (once,
whoever watches it) only for a job someone watches. Operators and admins only: a viewer
sees the evidence after the fact, not the page as a person types on it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from portalq.jobs import audit
from portalq.jobs.db import connections
from portalq.jobs.kinds import Channel
from portalq.jobs.operations import live_view
from portalq.portals.flows.live import KEYS, MOUSE_TYPES
from portalq.scheduler.console.live import SESSION_CHECK_SECONDS
from portalq.scheduler.console.pages_jobs import actor, form_reason
from portalq.scheduler.console.security import require

if TYPE_CHECKING:
    from portalq.scheduler.console.app import Console

log = logging.getLogger("portalq.console")

#: what a watcher gets: a frame's event text, or None (the stream ends)
Event = str | None


def frame_event(row: dict[str, Any]) -> str:
    data = json.dumps({"seq": row["seq"], "taken_at": row["taken_at"], "url": row["url"],
                       "width": row["width"], "height": row["height"],
                       "holder": row.get("holder"),
                       "jpeg": base64.b64encode(bytes(row["jpeg"])).decode()})
    return f"event: frame\ndata: {data}\n\n"


ENDED = "event: ended\ndata: \n\n"
#: how often an open page tells the worker it still watches (a watch lasts 30 s)
WATCH_RENEW_SECONDS = 10.0


class Frames:
    """The console's watchers by job, and the LISTEN session that feeds them."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.watchers: dict[int, set[asyncio.Queue[Event]]] = {}
        self.task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()

    def watch(self, job_id: int) -> asyncio.Queue[Event]:
        q: asyncio.Queue[Event] = asyncio.Queue(maxsize=2)
        self.watchers.setdefault(job_id, set()).add(q)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._listen())
            self.console.on_close.append(self.stop)
        return q

    def unwatch(self, job_id: int, q: asyncio.Queue[Event]) -> None:
        queues = self.watchers.get(job_id, set())
        queues.discard(q)
        if not queues:
            self.watchers.pop(job_id, None)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task

    def watch_page(self, job_id: int) -> None:
        """Tell the job's worker that its page is watched (it casts only then)."""
        with self.console.db() as conn:
            live_view.watch(conn, job_id)

    def read(self, job_id: int) -> dict[str, Any] | None:
        with self.console.db() as conn:
            return live_view.frame(conn, job_id)

    async def _listen(self) -> None:
        delay = 0.2
        while True:
            try:
                async with connections.listening(self.console.dsn, (Channel.LIVE,)) as heard:
                    self.listening.set()
                    delay = 0.2
                    async for note in heard:
                        job, _, seq = note.payload.partition(":")
                        if job.isdigit() and int(job) in self.watchers:
                            await self._send(int(job), seq == "0")
            except connections.LOST as exc:
                self.listening.clear()
                log.warning("live view listener lost the database (%s)", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _send(self, job_id: int, ended: bool) -> None:
        row = None if ended else await run_in_threadpool(self.read, job_id)
        if row is None and not ended:
            return
        event = ENDED if ended else frame_event(row or {})
        for q in list(self.watchers.get(job_id, ())):
            if q.full():   # a slow page skips frames, never falls behind
                with contextlib.suppress(asyncio.QueueEmpty):
                    q.get_nowait()
            q.put_nowait(event)


async def stream(console: Console, frames: Frames, job_id: int, token: str,
                 ) -> AsyncIterator[str]:
    """A job's frames as they come (the newest first), until its browser closes, the page
    goes, the server stops or the session ends."""
    q = frames.watch(job_id)
    loop = asyncio.get_running_loop()
    checked = loop.time()
    try:
        yield "retry: 2000\n\n"
        with contextlib.suppress(TimeoutError):   # heard before the first frame is read
            await asyncio.wait_for(frames.listening.wait(), 10)
        await run_in_threadpool(frames.watch_page, job_id)
        watched = loop.time()
        row = await run_in_threadpool(frames.read, job_id)
        if row is not None:
            yield frame_event(row)
        while not console.hub.stopping.is_set():
            if loop.time() - watched >= WATCH_RENEW_SECONDS:
                watched = loop.time()
                await run_in_threadpool(frames.watch_page, job_id)
            try:
                event = await asyncio.wait_for(q.get(), timeout=1.0)
            except TimeoutError:
                event = ""
            if loop.time() - checked >= SESSION_CHECK_SECONDS:
                checked = loop.time()
                if not await run_in_threadpool(console.hub.session_live, token):
                    yield "event: signed-out\ndata: \n\n"
                    return
            if event is None:
                return
            yield event or ": keep-alive\n\n"
            if event == ENDED:
                return
    finally:
        frames.unwatch(job_id, q)


def checked(event: Any) -> dict[str, Any]:
    """An input event as it may go to the page: a mouse press or release at numbers, up to
    200 characters of text, or one of the named keys; anything else is refused (400), so
    no text of the sender's choosing reaches the audit log or the worker."""
    if isinstance(event, dict):
        kind = event.get("kind")
        x, y = event.get("x"), event.get("y")
        if kind == "mouse" and event.get("type") in MOUSE_TYPES and all(
                isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < 100_000
                for v in (x, y)):
            return {"kind": kind, "type": event["type"], "x": x, "y": y}
        text = event.get("text")
        if kind == "text" and isinstance(text, str) and 0 < len(text) <= 200:
            return {"kind": kind, "text": text}
        if kind == "key" and event.get("key") in KEYS:
            return {"kind": kind, "key": event["key"]}
    raise HTTPException(400, "an input event is a mouse press or release, text or a named key")


def describe(event: dict[str, Any]) -> str:
    """An input event as the audit log keeps it: where a click was, how much was typed,
    never what (a person may type an SSN)."""
    if event["kind"] == "mouse":
        return f"{event['type']} at {int(event['x'])},{int(event['y'])}"
    if event["kind"] == "text":
        return f"typed {len(event['text'])} character(s) (not recorded)"
    return f"pressed {event['key']}"


def routes(console: Console) -> list[Route]:
    frames = Frames(console)

    def live(request: Request) -> Response:
        require(request, "operator")
        job_id = int(request.path_params["job_id"])
        return StreamingResponse(
            stream(console, frames, job_id, request.state.session_token),
            media_type="text/event-stream", headers={"x-accel-buffering": "no"})

    async def take(request: Request) -> Response:
        """An operator takes the page over: nobody else's input goes to it meanwhile."""
        user = require(request, "operator")
        job_id = int(request.path_params["job_id"])
        reason = form_reason(await request.form())

        def run() -> None:
            with console.db() as conn, conn.transaction():
                if not live_view.take(conn, job_id, user.name):
                    held = live_view.holder(conn, job_id)
                    raise HTTPException(409, f"{held} holds this page: one person at a time"
                                        if held else "this job's page is not live")
                audit.record(conn, actor(user), "take over the page", f"job:{job_id}", reason)
        await run_in_threadpool(run)
        return RedirectResponse(f"/jobs/{job_id}?done=you+hold+the+page", status_code=303)

    async def release(request: Request) -> Response:
        user = require(request, "operator")
        job_id = int(request.path_params["job_id"])
        reason = form_reason(await request.form())

        def run() -> None:
            with console.db() as conn, conn.transaction():
                if live_view.release(conn, job_id, user.name):
                    audit.record(conn, actor(user), "hand the page back", f"job:{job_id}",
                                 reason)
        await run_in_threadpool(run)
        return RedirectResponse(f"/jobs/{job_id}?done=handed+back", status_code=303)

    async def page_input(request: Request) -> Response:
        """One input event of the page's holder (JSON): sent to the worker and audited in
        one transaction; anyone else's is refused (403), nothing sent."""
        user = require(request, "operator")
        job_id = int(request.path_params["job_id"])
        try:
            event = checked(await request.json())
        except ValueError:
            raise HTTPException(400, "an input event is a JSON object") from None

        def run() -> bool:
            with console.db() as conn, conn.transaction():
                if not live_view.send_input(conn, job_id, user.name, event):
                    return False
                audit.record(conn, actor(user), "page input", f"job:{job_id}",
                             describe(event))
                return True
        if not await run_in_threadpool(run):
            raise HTTPException(403, "you do not hold this page (take it over first)")
        return Response(status_code=204)

    return [Route("/jobs/{job_id:int}/live", live),
            Route("/jobs/{job_id:int}/live/take", take, methods=["POST"]),
            Route("/jobs/{job_id:int}/live/release", release, methods=["POST"]),
            Route("/jobs/{job_id:int}/live/input", page_input, methods=["POST"])]
