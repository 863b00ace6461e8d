"""Helpers every flow uses: a fresh page, evidence, masking, navigation, documents."""

from __future__ import annotations

import asyncio
import logging
import re
import tempfile
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from portalq.jobs.errors import (
    DeferUntil,
    HandlerOutcome,
    PortalChanged,
    PortalUnavailable,
    RetryableError,
)
from portalq.portals.flows import never_twice
from portalq.portals.flows.browser import close_context, note_missing
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.drift import keep_evidence
from portalq.portals.flows.masking import (  # noqa: F401 - the flow toolkit's masking, re-exported
    MASK_ATTR,
    SENSITIVE_SELECTOR,
    FrameUnreadable,
    mark_secrets,
    masked_screenshot,
    redact,
    secret_forms,
    unmark_secrets,
)

# the flow toolkit's masking, re-exported

if TYPE_CHECKING:
    from playwright.async_api import Download, Locator, Page, Request, Response

log = logging.getLogger("portalq.flows")

class Evidence:
    """Numbered screenshots of one attempt, masked (by selector and by value). Best effort:
    a screenshot that cannot be taken (a frame that cannot be checked for secret values, a
    page gone) is recorded as missing evidence, and the flow goes on (evidence never
    decides an outcome)."""

    def __init__(self, ctx: FlowContext[BaseModel]) -> None:
        self.ctx = ctx
        self.seq = 0

    async def shot(self, page: Page, name: str) -> bool:
        try:
            await self.take(page, name)
            return True
        except Exception as exc:  # noqa: BLE001 - evidence never decides an outcome
            note_missing(self.ctx.artifacts_dir, f"screenshot {name}", exc)
            return False

    async def take(self, page: Page, name: str) -> None:
        """One screenshot; raises if it cannot be taken (no partial file is left)."""
        self.seq += 1
        path = self.ctx.artifacts_dir / f"{self.seq:02d}-{name}.png"
        try:
            await masked_screenshot(page, path, self.ctx.secrets())
        except BaseException:
            path.unlink(missing_ok=True)
            self.seq -= 1
            raise


@asynccontextmanager
async def browser_page(ctx: FlowContext[BaseModel]) -> AsyncIterator[tuple[Page, Evidence]]:
    """A page in a fresh browser context; a masked screenshot on failure; Playwright
    errors become retryable errors; every outcome's message has the secrets redacted; a
    changed portal's page also leaves its aria snapshot beside the expected one
    (:mod:`portals.flows.drift`).
    The context's trace is kept per the trace policy (see :mod:`portals.flows.browser`).
    Dialogs are Playwright's to dismiss unless a page object accepts them
    (:class:`portals.flows.pages.PortalPage` does)."""
    # playwright only when a browser is needed: the CLI and enqueue never load it
    from playwright.async_api import Error as PlaywrightError

    context = await ctx.new_browser_context()
    await never_twice.guard(ctx, context)   # a point of no return is never sent twice
    evidence = Evidence(ctx)
    failed = True
    try:
        page = await context.new_page()
        try:
            yield page, evidence
            failed = False
        except HandlerOutcome as exc:
            exc.args = tuple(redact(str(a), ctx.secrets()) for a in exc.args)
            # a wait (an approval at the review page, a portal still deciding) is no failure:
            # its page is kept as what the wait looked like, named so
            await _failure_shot(page, evidence,
                                "deferred" if isinstance(exc, DeferUntil) else "failure")
            if isinstance(exc, PortalChanged):   # the page beside the one expected
                await keep_evidence(page, ctx, exc)
                # the service may keep the browser for a person (scheduler/holds.py);
                # a context without that (tests, scripts) has no such method
                hold = getattr(ctx, "hold_browser", None)
                held = await hold(str(exc)[:500]) if hold is not None else None
                if held:
                    exc.args = (f"{exc.args[0] if exc.args else exc}; the browser was "
                                f"held for a person: {held}", *exc.args[1:])
            raise
        except PlaywrightError as exc:
            await _failure_shot(page, evidence)
            kind = PortalUnavailable if portal_sign(exc) else RetryableError
            raise kind(redact(str(exc).splitlines()[0], ctx.secrets())) from None
    finally:
        await close_context(context, failed=failed)


def portal_sign(exc: BaseException) -> bool:
    """Does this Playwright error point at the portal (a refused, reset or dropped
    connection, a page that does not load in time) rather than at the flow (a control it
    expected and did not find)?"""
    # playwright only when a browser is needed: the CLI and enqueue never load it
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    text = str(exc)
    if "net::ERR_" in text or "NS_ERROR_" in text:
        return True
    lowered = text.lower()
    return isinstance(exc, PlaywrightTimeout) and any(
        w in lowered for w in ("goto", "navigation", "wait_for_load_state", "waiting for url"))


async def _failure_shot(page: Page, evidence: Evidence, name: str = "failure") -> None:
    """Best effort: a page mid-navigation (e.g. after a dropped connection) may refuse a
    screenshot once; wait for it to settle and try again; else it is missing evidence."""
    for last in (False, True):
        try:
            await evidence.take(page, name)
            return
        except Exception as exc:  # noqa: BLE001 - must not hide the outcome being raised
            if last:
                note_missing(evidence.ctx.artifacts_dir, f"{name} screenshot", exc)
                return
            with suppress(Exception):
                await page.wait_for_load_state("load", timeout=3000)


class ConnectionLost(PortalUnavailable):
    """The page's document request failed (connection dropped or reset): the portal's
    answer is unknown."""


async def click_and_wait(page: Page, target: Locator, *,
                         timeout: float | None = None) -> int | None:
    """Click ``target`` and wait for the page load it causes.

    Returns the final document's HTTP status; raises :class:`ConnectionLost` as soon as the
    main document request fails, and Playwright's TimeoutError if nothing loads in time.
    """
    failed: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def on_failed(request: Request) -> None:
        if (not failed.done() and request.is_navigation_request()
                and request.frame == page.main_frame):
            failed.set_result(request.failure or "request failed")

    async def navigate() -> Response | None:
        async with page.expect_navigation(timeout=timeout) as info:
            await target.click(timeout=timeout)
        return await info.value

    page.on("requestfailed", on_failed)
    nav = asyncio.ensure_future(navigate())
    try:
        waits: set[asyncio.Future[str] | asyncio.Future[Response | None]] = {nav, failed}
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        page.remove_listener("requestfailed", on_failed)
    if not nav.done():
        nav.cancel()
        with suppress(BaseException):
            await nav
        raise ConnectionLost(f"connection lost: {failed.result()}")
    response = nav.result()
    return response.status if response is not None else None


async def page_text(page: Page) -> str:
    """The visible text of the page, whitespace-normalised."""
    return " ".join((await page.locator("body").inner_text()).split())


def check_pdf(name: str, data: bytes) -> bytes:
    if not data.startswith(b"%PDF-"):
        raise RetryableError(f"{name} is not a PDF (download corrupt or an error page)")
    return data


def pdf_shows(data: bytes, text: str) -> bool:
    """Whether ``text`` appears in the PDF ``data``, as is or in one of its compressed
    content streams. A plain scan (no PDF library is a dependency): a letter whose text is
    encoded otherwise (glyph ids, split runs) reads as False, so the answer is a note for a
    person, never an outcome."""
    needle = text.encode()
    if needle in data:
        return True
    for m in re.finditer(rb"stream\r?\n", data):
        with suppress(zlib.error):
            if needle in zlib.decompressobj().decompress(data[m.end():]):
                return True
    return False


async def download(page: Page, link: Locator, workdir: Path | None = None) -> tuple[str, bytes]:
    """Click ``link``, wait for the download, return (suggested name, bytes) — a PDF."""
    async with page.expect_download() as info:
        await link.click()
    dl = await info.value
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        target = Path(tmp) / "download"
        await dl.save_as(target)  # works for a remote browser too (streamed)
        data = target.read_bytes()
    name = dl.suggested_filename or "document.pdf"
    return name, check_pdf(name, data)


async def fetch_document(ctx: FlowContext[BaseModel], url: str) -> tuple[str, bytes]:
    """GET a document by URL in a fresh context (no page): (file name, PDF bytes)."""
    context = await ctx.new_browser_context()
    failed = True
    try:
        response = await context.request.get(url)
        if not response.ok:
            raise RetryableError(f"document download failed: HTTP {response.status}")
        name = url.rstrip("/").rsplit("/", 1)[-1].split("?")[0] or "document.pdf"
        data = check_pdf(name, await response.body())
        failed = False
        return name, data
    finally:
        await close_context(context, failed=failed)


async def has_document(ctx: FlowContext[BaseModel], name: str) -> bool:
    return any(doc[0] == name for doc in await ctx.documents_of(ctx.job_id))


# ---- single-page apps: a step ends when the app shows its next state -------------------------

#: installed before a click: counts inline answers (an ``<h2>`` added inside
#: ``[aria-live=polite]``) and dialogs (``[role=dialog]``) the app adds from then on
_ARM_JS = """() => {
  const w = window, inLive = (n) => n.closest && n.closest('[aria-live=polite]');
  w.__portalq = {answer: 0, dialog: 0};
  if (w.__portalqObserver) w.__portalqObserver.disconnect();
  w.__portalqObserver = new MutationObserver((muts) => { for (const m of muts) {
    for (const n of m.addedNodes) {
      if (n.nodeType !== 1) continue;
      if (inLive(n) && (n.tagName === 'H2' || n.querySelector('h2'))) w.__portalq.answer++;
      if (n.matches('[role=dialog]') || n.querySelector('[role=dialog]')) w.__portalq.dialog++;
    }
    if (m.target.nodeType === 1 && inLive(m.target) && m.target.querySelector('h2'))
      w.__portalq.answer++;
  } });
  w.__portalqObserver.observe(document.body, {childList: true, subtree: true});
  const h = document.querySelector('h2.stepIndicator-heading');
  return {url: location.href, step: h ? h.innerText : null};
}"""
#: true (the kind of the new state) once the app shows something new
_NEXT_JS = """(before) => {
  const s = window.__portalq;
  if (!s) return 'document';
  if (location.href !== before.url) return 'route';
  const h = document.querySelector('h2.stepIndicator-heading');
  if ((h ? h.innerText : null) !== before.step) return 'step';
  if (s.answer) return 'answer';
  if (s.dialog) { s.dialog = 0; return 'dialog'; }
  return false;
}"""


#: what a flow expects after a click on a single-page app (a changed portal's evidence)
NEXT_STATES = ("one of: a route change, the step indicator's next step, an inline answer "
               "(an <h2> in the aria-live region), a dialog, a download, a new document")


class NoNextState(PortalChanged):
    """The portal answered every request, yet the app showed nothing the flow knows: the
    app changed (not an outage sign; its portal is paused until an operator resumes it)."""


class AppWatch:
    """Watches one tab across a click: :meth:`next_state` returns when the app shows its next
    state — a route change (``route``), the step indicator (``step``), an inline answer
    (``answer``), a dialog (``dialog``), a download (``download``) or a new document
    (``document``) — whichever comes first. A wait that ends with nothing is an outage sign
    (:class:`PortalUnavailable`) only if the portal failed: a request still unanswered, a
    connection error, a 5xx; otherwise :class:`NoNextState`."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.pending: set[Request] = set()
        self.failures: list[str] = []
        self.downloads: list[Download] = []
        self._event = asyncio.Event()
        self._before: dict[str, Any] = {}

    def _on_request(self, request: Request) -> None:
        self.pending.add(request)

    def _on_done(self, request: Request) -> None:
        self.pending.discard(request)

    def _on_failed(self, request: Request) -> None:
        self.pending.discard(request)
        self.failures.append(f"{request.method} {request.resource_type}: "
                             f"{request.failure or 'failed'}")
        if request.is_navigation_request() and request.frame == self.page.main_frame:
            self._event.set()

    def _on_response(self, response: Response) -> None:
        if response.status >= 500:
            self.failures.append(f"HTTP {response.status}")

    def _on_download(self, download: Download) -> None:
        self.downloads.append(download)
        self._event.set()

    async def __aenter__(self) -> AppWatch:
        page = self.page
        page.on("request", self._on_request)
        page.on("requestfinished", self._on_done)
        page.on("requestfailed", self._on_failed)
        page.on("response", self._on_response)
        page.on("download", self._on_download)
        self._before = await page.evaluate(_ARM_JS)
        return self

    async def __aexit__(self, *exc: object) -> None:
        page = self.page
        page.remove_listener("request", self._on_request)
        page.remove_listener("requestfinished", self._on_done)
        page.remove_listener("requestfailed", self._on_failed)
        page.remove_listener("response", self._on_response)
        page.remove_listener("download", self._on_download)

    async def next_state(self, timeout_ms: float, where: str) -> str:
        """The kind of the next state, waiting at most ``timeout_ms``."""
        # playwright only when a browser is needed: the CLI and enqueue never load it
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        shown = asyncio.ensure_future(self.page.wait_for_function(
            _NEXT_JS, arg=self._before, timeout=timeout_ms, polling=100))
        event = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait({shown, event}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            event.cancel()
        if not shown.done():
            shown.cancel()
            with suppress(BaseException):
                await shown
            if self.downloads:
                return "download"
            raise ConnectionLost(f"connection lost: {self.failures[-1]}")
        try:
            kind = await (await shown).json_value()
        except PlaywrightTimeout:
            if self.pending or self.failures:
                what = self.failures[-1] if self.failures else "a request still unanswered"
                raise PortalUnavailable(f"no answer from the portal at {where} ({what})") from None
            raise NoNextState(f"nothing new on the page after {where} — portal changed?",
                              where=where, expected=NEXT_STATES) from None
        if kind == "document":
            with suppress(Exception):
                await self.page.wait_for_load_state("load", timeout=timeout_ms)
        return str(kind)


async def click_and_settle(page: Page, target: Locator, where: str, *,
                           timeout_ms: float = 30_000) -> str:
    """Click ``target`` and return the kind of the app's next state (:class:`AppWatch`)."""
    async with AppWatch(page) as watch:
        await target.click()
        return await watch.next_state(timeout_ms, where)
