"""Live updates: one LISTEN connection per console process, fanned out to every open
page over server-sent events.

A notification (an enqueue, a portal change, an escalation written) or, while anyone
watches, the refresh period recomputes the overview's live part once (debounced) and sends
the same HTML fragment to every open overview, and what needs a person (one count, the
one the navigation shows) to every open page: ten open pages cost one query round, not
ten. A page other than the overview asks for the count only (``/events?only=needs``): it
costs one small query per round, not the overview's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool

from portalq.jobs.admin import users as console_users
from portalq.jobs.db import connections
from portalq.jobs.kinds import Channel

if TYPE_CHECKING:
    from portalq.scheduler.console.app import Console

log = logging.getLogger("portalq.console")
DEBOUNCE = 0.25
#: at most one recomputation a second, however fast notifications come
MIN_INTERVAL = 1.0


#: what a round sends: (the overview's fragment, or None when no overview is open; what
#: needs a person, as the navigation shows it); None ends the stream
Update = tuple[str | None, str] | None


class Hub:
    def __init__(self, console: Console, render: Callable[[], str]) -> None:
        """``render``: the overview's live fragment, now (pages_overview.py)."""
        self.console = console
        self.render = render
        self.subscribers: set[asyncio.Queue[Update]] = set()
        #: the subscribers that show the overview (the others want the count only)
        self.overviews: set[asyncio.Queue[Update]] = set()
        self.kick = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.stopping = asyncio.Event()
        self.renders = 0  # fragments computed (tests and the benchmark read it)

    async def start(self) -> None:
        self.kick = asyncio.Event()
        self.stopping = asyncio.Event()
        self.tasks = [asyncio.create_task(self._listen()), asyncio.create_task(self._pump())]

    async def stop(self) -> None:
        self.close_streams()
        for t in self.tasks:
            t.cancel()
        for t in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    def subscribe(self, overview: bool = True) -> asyncio.Queue[Update]:
        q: asyncio.Queue[Update] = asyncio.Queue(maxsize=4)
        self.subscribers.add(q)
        if overview:
            self.overviews.add(q)
        self.kick.set()  # a first fragment at once
        return q

    def unsubscribe(self, q: asyncio.Queue[Update]) -> None:
        self.subscribers.discard(q)
        self.overviews.discard(q)

    async def _listen(self) -> None:
        delay = 0.2
        while not self.stopping.is_set():
            try:
                # an escalation written (OUTBOX) is a new item of "Needs you"
                async with connections.listening(
                        self.console.dsn, (Channel.JOBS, Channel.PORTALS, Channel.OUTBOX),
                ) as notifications:
                    delay = 0.2
                    async for _ in notifications:
                        self.console.snapshots.invalidate()
                        self.kick.set()
            except connections.LOST as exc:
                log.warning("console listener lost the database (%s)", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def close_streams(self) -> None:
        """End every open stream (server shutdown: the browsers reconnect to the next one)."""
        self.stopping.set()
        for q in list(self.subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                q.put_nowait(None)

    async def _pump(self) -> None:
        last = 0.0
        loop = asyncio.get_running_loop()
        snapshots = self.console.snapshots
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.kick.wait(), timeout=snapshots.period())
            self.kick.clear()
            if not self.subscribers:
                continue
            # a burst of enqueues: one refresh
            gap = max(MIN_INTERVAL, 10 * snapshots.cost)
            await asyncio.sleep(max(DEBOUNCE, gap - (loop.time() - last)))
            self.kick.clear()
            last = loop.time()
            try:
                fragment = await run_in_threadpool(self.render) if self.overviews else None
                # after the overview's snapshot: the count it showed (the same read)
                needs = await run_in_threadpool(snapshots.needs_label)
            except Exception:  # noqa: BLE001 - a failed refresh must not end live updates
                log.exception("live overview refresh failed")
                continue
            if fragment is not None:
                self.renders += 1
            for q in list(self.subscribers):
                if q.full():
                    with contextlib.suppress(asyncio.QueueEmpty):
                        q.get_nowait()
                q.put_nowait((fragment if q in self.overviews else None, needs))

    def session_live(self, token: str) -> bool:

        with self.console.db() as conn:
            return console_users.session_live(conn, token, self.console.sessions.idle)


def sse(fragment: str, event: str = "overview") -> str:
    data = "\n".join(f"data: {line}" for line in fragment.splitlines() or [""])
    return f"event: {event}\n{data}\n\n"


#: how often an open stream checks that its session is still live
SESSION_CHECK_SECONDS = 15.0


async def stream(hub: Hub, request: Any) -> Any:
    """The live updates for one page (the overview's fragment, unless it asks for
    ``only=needs``, and what needs a person), until the page goes, the server stops, or
    the session ends (idle, signed out, user disabled): the stream itself is not activity,
    so a page left open does not keep a session alive."""
    token = request.state.session_token
    q = hub.subscribe(overview=request.query_params.get("only") != "needs")
    checked = asyncio.get_running_loop().time()
    try:
        yield "retry: 2000\n\n"
        while not hub.stopping.is_set():
            quiet = False
            update: Update = None
            try:
                update = await asyncio.wait_for(q.get(), timeout=SESSION_CHECK_SECONDS)
            except TimeoutError:
                quiet = True
            if update is None and not quiet:
                break
            now = asyncio.get_running_loop().time()
            if now - checked >= SESSION_CHECK_SECONDS:
                checked = now
                if not await run_in_threadpool(hub.session_live, token):
                    yield "event: signed-out\ndata: \n\n"
                    break
            if update is None:
                yield ": keep-alive\n\n"
                continue
            fragment, needs = update
            yield (sse(fragment) if fragment is not None else "") + sse(needs, "needs")
    finally:
        hub.unsubscribe(q)
