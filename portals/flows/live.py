"""The live view of a running flow: Chromium's DevTools screencast of the context's page,
masked in the page itself before a frame is taken, handed to a sink (the scheduler's sink
writes it to the database for the console: scheduler/live_frames.py), and a person's input
to the page (a takeover).

    cast = Screencast(context, secrets, publish)   # before the flow opens its page
    await cast.start()
    ...                                            # frames go to publish(Frame)
    await cast.stop()

Masking, the same rule as screenshots (portals/flows/masking.py), applied to the page
because a screencast frame cannot be masked after it is taken:

- by selector (:data:`SENSITIVE_SELECTOR`): a style sheet the context adds to every
  document before its first paint (an init script inserts it as soon as the document has
  a root element, in a microtask, so before any frame) paints those elements over;
- by value (the job's secrets in every written form): at each frame the page's elements
  are checked (every frame of the page) and those showing one are marked
  (:data:`LIVE_MASK_ATTR`), which the same style sheet paints over; so is an input whose
  value is the start of a secret's 9-digit form (a number typed key by key, from its first
  digit), and elsewhere the start of such a number from its 4th character on;
- a frame taken before a new mark was painted is never shown: when a check marks anything
  new, that frame is dropped, the DevTools session that took it ends (Chromium keeps up to
  two frames in flight) and a new one casts the page once the marks are painted (two
  animation frames later); a frame whose page cannot be read (navigating) is dropped too.

On demand (the worker's way): the page is cast only while a console page watches it (it
says so every few seconds); an unwatched page costs no frame, no check, no write.

Flow control: Chromium sends the next frame only after the last one is acknowledged, so
frames are acknowledged at most :data:`MAX_FPS` times a second: a busy page costs a few
checks a second, a still page none (the screencast sends frames on change only).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from portalq.portals.flows import masking

log = logging.getLogger("portalq.live")

#: the attribute marking an element that shows a secret in the live view (its own, so a
#: screenshot's unmarking, which removes :data:`masking.MASK_ATTR`, leaves it)
LIVE_MASK_ATTR = "data-portalq-live-mask"
MAX_FPS = 4.0
#: how long one "watch" keeps an on-demand screencast going (a console page renews it)
WATCH_S = 30.0
JPEG_QUALITY = 60
MAX_WIDTH = 1280
MAX_HEIGHT = 1600

_SELECTORS = ", ".join(f"{s.strip()}" for s in
                       [*masking.SENSITIVE_SELECTOR.split(","), f"[{LIVE_MASK_ATTR}]"])
_MASKED = ", ".join(f"{s.strip()}, {s.strip()} *" for s in _SELECTORS.split(","))
#: what a masked element looks like in a frame: a grey box, no text, no caret, no image
MASK_CSS = (
    f"{_MASKED} {{ color: transparent !important; -webkit-text-fill-color: transparent "
    "!important; text-shadow: none !important; caret-color: transparent !important; "
    "background: #777 !important; border-color: #777 !important; }"
    + " ".join(f" {s.strip()}::before, {s.strip()}::after, {s.strip()}::placeholder "
               "{ visibility: hidden !important; }" for s in _SELECTORS.split(","))
    + " ".join(f" {s.strip()} img, {s.strip()} canvas, {s.strip()} svg "
               "{ visibility: hidden !important; }" for s in _SELECTORS.split(",")))

_STYLE_ID = "portalq-live-mask"
# inserted in the document's root element at once, else as soon as the parser makes it,
# and again in a new root (a mutation observer's callback is a microtask: it runs before
# the next paint)
_INIT_JS = """(() => {
  const css = %s, id = %s;
  const add = () => {
    if (document.getElementById(id)) return true;
    const root = document.documentElement;
    if (!root) return false;
    const style = document.createElement('style');
    style.id = id;
    style.textContent = css;
    root.appendChild(style);
    return true;
  };
  add();
  // kept: a document rewritten in place (document.open) gets a new root element
  new MutationObserver(add).observe(document, {childList: true});
})();"""

# the screenshots' collection of the page's elements (masking.py), kept under a name of its
# own: a screenshot taken meanwhile must not swap the list these positions refer to
_COLLECT_JS = masking.COLLECT_JS.replace("__portalqMaskables", "__portalqLiveMaskables")
# marks the elements Python chose (by position in the page's kept list); the count of
# those not marked before
_MARK_JS = """([indices, attr]) => {
  const els = window.__portalqLiveMaskables || [];
  delete window.__portalqLiveMaskables;
  let fresh = 0;
  for (const i of indices) {
    const el = els[i];
    if (el && !el.hasAttribute(attr)) { el.setAttribute(attr, ''); fresh++; }
  }
  return fresh;
}"""
# the values of the inputs and text areas (a number typed key by key is checked in Python
# against the starts of the secrets' forms: the secrets are never sent to the page); then
# the chosen ones marked, by position
_VALUES_JS = """() => Array.from(document.querySelectorAll('input, textarea'),
                                 el => (el.value || '').trim())"""
_MARK_TYPED_JS = """([indices, attr]) => {
  const els = document.querySelectorAll('input, textarea');
  let fresh = 0;
  for (const i of indices) {
    const el = els[i];
    if (el && !el.hasAttribute(attr)) { el.setAttribute(attr, ''); fresh++; }
  }
  return fresh;
}"""
#: resolves once a frame with the current DOM has been painted (two animation frames)
_PAINTED_JS = ("() => new Promise(r => requestAnimationFrame(() => "
               "requestAnimationFrame(() => r(true))))")


MOUSE_TYPES = ("mousePressed", "mouseReleased", "mouseMoved")
#: the keys a person may press besides text, with their Windows virtual key codes (the
#: DevTools protocol's way to name a key to the page)
KEYS = {"Enter": 13, "Backspace": 8, "Tab": 9, "Escape": 27, "Delete": 46,
        "ArrowLeft": 37, "ArrowUp": 38, "ArrowRight": 39, "ArrowDown": 40}


def _js(text: str) -> str:
    return json.dumps(text)


_INIT = _INIT_JS % (_js(MASK_CSS), _js(_STYLE_ID))


def live_forms(secrets: Iterable[str]) -> list[str]:
    """What the live view masks by value: every written form of each secret, and for a
    9-digit number every prefix of its forms from 4 characters on."""
    forms = set(masking.secret_forms(secrets))
    for form in list(forms):
        if len(re.sub(r"\D", "", form)) == 9:
            forms |= {form[:n] for n in range(4, len(form))
                      if len(re.sub(r"\D", "", form[:n])) >= 4}
    return sorted(forms, key=len, reverse=True)


@dataclass(frozen=True)
class Frame:
    jpeg: bytes
    #: when Chromium swapped it (seconds since the epoch)
    taken_at: float
    width: int
    height: int
    url: str


Publish = Callable[[Frame], Awaitable[None]]


class Screencast:
    """The screencast of the newest page of ``context``, masked, to ``publish``."""

    def __init__(self, context: Any, secrets: Iterable[str], publish: Publish, *,
                 max_fps: float = MAX_FPS, on_demand: bool = False) -> None:
        """``on_demand``: cast only while someone watches (:meth:`input` ``watch``
        events, each good for :data:`WATCH_S`); else always."""
        self.context = context
        self.watched_until = 0.0 if on_demand else math.inf
        self.forms = live_forms(secrets)
        self.prefixes = [f for f in self.forms if len(re.sub(r"\D", "", f)) == 9]
        self.publish = publish
        self.interval = 1.0 / max_fps
        self.session: Any = None
        self.page: Any = None
        self.safe_after = 0.0       # frames taken before this are dropped
        self.published = 0
        self.dropped = 0
        self._last_ack = 0.0
        self._checking = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopped = False
        #: set when the person holding the page hands it back (the console user's name)
        self.handed_back = asyncio.Event()
        self.handed_back_by = ""

    async def start(self) -> None:
        await self.context.add_init_script(_INIT)
        self.context.on("page", self._on_page)
        for page in self.context.pages:
            await page.evaluate(_INIT)
        if self.context.pages:
            await self._follow(self.context.pages[-1])

    def _on_page(self, page: Any) -> None:
        self._spawn(self._follow(page))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def watched(self) -> bool:
        return time.monotonic() < self.watched_until

    async def _follow(self, page: Any) -> None:
        """Cast ``page`` (the newest: the one the flow works on) in a new DevTools session
        if someone watches; the frames still coming from the one before are dropped."""
        if self._stopped:
            return
        old, self.session, self.page = self.session, None, page
        if old is not None:
            with contextlib.suppress(Exception):
                await old.detach()
        if not self.watched():
            return
        try:
            session = await self.context.new_cdp_session(page)
            session.on("Page.screencastFrame", lambda event: self._spawn(
                self._frame(session, page, event)))
            self.session = session
            await session.send("Page.startScreencast", {
                "format": "jpeg", "quality": JPEG_QUALITY, "maxWidth": MAX_WIDTH,
                "maxHeight": MAX_HEIGHT})
        except Exception as exc:  # noqa: BLE001 - the live view never decides an outcome
            log.info("no live view of this page: %s", str(exc).splitlines()[0][:200])

    async def _frame(self, session: Any, page: Any, event: dict[str, Any]) -> None:
        ack = True
        try:
            async with self._checking:
                if session is not self.session or self._stopped:
                    return
                if not self.watched():   # nobody watches any more: no frames, no checks
                    ack = False
                    self.session = None
                    with contextlib.suppress(Exception):
                        await session.detach()
                    return
                meta = event["metadata"]
                taken_at = float(meta.get("timestamp", 0.0))
                fresh = await self._mark(page)
                if fresh:
                    # Chromium keeps up to two frames in flight, taken before these marks
                    # were painted: the session that took them ends, a new one casts the
                    # page once they are painted
                    self.dropped += 1
                    ack = False
                    with contextlib.suppress(Exception):
                        await self._in(page.main_frame, page)(_PAINTED_JS, None)
                    self.safe_after = time.time()
                    await self._follow(page)
                    return
                if fresh is None or taken_at <= self.safe_after:
                    self.dropped += 1
                else:
                    await self.publish(Frame(
                        base64.b64decode(event["data"]), taken_at,
                        int(meta.get("deviceWidth", 0)), int(meta.get("deviceHeight", 0)),
                        page.url.split("?")[0]))
                    self.published += 1
            # acknowledged at most max_fps times a second: Chromium waits for it
            wait = self._last_ack + self.interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._last_ack = time.monotonic()
        except Exception as exc:  # noqa: BLE001 - the live view never decides an outcome
            log.debug("live frame not published: %s", exc)
        finally:
            if ack:
                with contextlib.suppress(Exception):
                    await session.send("Page.screencastFrameAck",
                                       {"sessionId": event["sessionId"]})

    async def _mark(self, page: Any) -> int | None:
        """Mark the page's elements showing a secret (or an input holding the start of
        one); how many were not marked before; None when the page cannot be read
        (navigating, detached: it cannot be proved clean)."""
        if not self.forms:
            return 0
        try:
            fresh = 0
            for frame in page.frames:
                run = self._in(frame, page)
                elements = await run(_COLLECT_JS, True)
                chosen = masking.to_mask(elements, self.forms)
                fresh += await run(_MARK_JS, [chosen, LIVE_MASK_ATTR])
                if self.prefixes:
                    values = await run(_VALUES_JS, None)
                    typed = [i for i, v in enumerate(values)
                             if v and any(f.startswith(v) for f in self.prefixes)]
                    if typed:
                        fresh += await run(_MARK_TYPED_JS, [typed, LIVE_MASK_ATTR])
            return fresh
        except Exception:  # noqa: BLE001
            return None

    def _in(self, frame: Any, page: Any) -> Callable[[str, Any], Awaitable[Any]]:
        """How to run a function in ``frame``: the main frame's through the DevTools
        session (Playwright's own evaluate is an action of the trace: four a second would
        bury the flow's steps in the trace viewer), a child frame's through Playwright
        (it reaches frames of other processes too)."""
        session = self.session
        if frame is not page.main_frame or session is None:
            return frame.evaluate  # type: ignore[no-any-return]

        async def run(function: str, arg: Any) -> Any:
            reply = await session.send("Runtime.evaluate", {
                "expression": f"({function})({json.dumps(arg)})", "returnByValue": True,
                "awaitPromise": True})
            if "exceptionDetails" in reply:
                raise RuntimeError("the page could not be read")
            return reply["result"].get("value")
        return run

    async def input(self, event: dict[str, Any]) -> None:
        """A person's input to the page (a takeover from the console): a mouse event at
        the page's CSS pixels, text typed, or a named key. Sent through the DevTools
        session as the browser's own input events, so the page sees a person's."""
        kind = event.get("kind")
        if kind == "watch":
            idle = self.session is None
            self.watched_until = max(self.watched_until, time.monotonic() + WATCH_S)
            if idle and self.page is not None:
                self._spawn(self._follow(self.page))
            return
        if kind == "handback":
            self.handed_back_by = str(event.get("by", ""))[:200]
            self.handed_back.set()
            return
        session = self.session
        if session is None:
            return
        if kind == "mouse" and event.get("type") in MOUSE_TYPES:
            await session.send("Input.dispatchMouseEvent", {
                "type": event["type"], "x": float(event["x"]), "y": float(event["y"]),
                "button": "left", "buttons": 1 if event["type"] == "mousePressed" else 0,
                "clickCount": 1})
        elif kind == "text" and isinstance(event.get("text"), str):
            await session.send("Input.insertText", {"text": event["text"][:200]})
        elif kind == "key" and event.get("key") in KEYS:
            code = KEYS[event["key"]]
            down: dict[str, Any] = {"type": "rawKeyDown", "key": event["key"],
                                    "code": event["key"], "windowsVirtualKeyCode": code}
            if event["key"] == "Enter":
                down |= {"type": "keyDown", "text": "\r"}
            await session.send("Input.dispatchKeyEvent", down)
            await session.send("Input.dispatchKeyEvent", {
                "type": "keyUp", "key": event["key"], "code": event["key"],
                "windowsVirtualKeyCode": code})

    async def stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(Exception):
            self.context.remove_listener("page", self._on_page)
        session, self.session = self.session, None
        if session is not None:
            with contextlib.suppress(Exception):
                await session.send("Page.stopScreencast")
            with contextlib.suppress(Exception):
                await session.detach()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
