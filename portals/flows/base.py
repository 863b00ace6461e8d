"""Helpers every flow uses: a fresh page, evidence, masking, navigation, documents."""

from __future__ import annotations

import asyncio
import logging
import re
import tempfile
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Any

from jobs import clock
from jobs.errors import HandlerOutcome, PortalUnavailable, RetryableError
from portals.calendar import zone
from portals.flows.browser import close_context, note_missing
from portals.flows.context import FlowContext

log = logging.getLogger("portalq.flows")

#: elements masked in every screenshot (stand-ins mark sensitive output with data-sensitive)
SENSITIVE_SELECTOR = (
    "[data-sensitive], input[type=password], input[name*=ssn i], input[name*=itin i]"
)


def secret_forms(secrets: Iterable[str]) -> list[str]:
    """Every written form of the secrets: as given, and for a 9-digit number (SSN, ITIN,
    EIN) digits only, dashed and spaced; longest first."""
    forms: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        forms.add(secret)
        digits = re.sub(r"\D", "", secret)
        if len(digits) == 9:
            forms |= {digits, f"{digits[:3]}-{digits[3:5]}-{digits[5:]}",
                      f"{digits[:3]} {digits[3:5]} {digits[5:]}"}
    return sorted(forms, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and its digits-only / dashed forms) replaced by ***."""
    for form in secret_forms(secrets):
        text = text.replace(form, "***")
    return text


MASK_ATTR = "data-portalq-mask"

# Two steps, so that the secrets themselves are never sent to the page (nor recorded in a
# trace as an evaluate argument): the page lists its elements -- attribute values, input
# value and options, whitespace-normalised text, parent -- and keeps them; Python finds
# those showing a secret; the page marks them (MASK_ATTR) by position in its kept list.
_COLLECT_JS = """() => {
  const norm = s => (s || '').replace(/[\\s\\u00a0]+/g, ' ');
  const els = [], out = [], pos = new Map();
  const visit = (root, parent) => {
    for (const el of root.querySelectorAll('*')) {
      if (['SCRIPT', 'STYLE', 'TEMPLATE'].includes(el.tagName)) continue;
      const parts = Array.from(el.attributes, a => a.value);
      if ('value' in el && typeof el.value === 'string') parts.push(el.value);
      if (el.tagName === 'SELECT') parts.push(...Array.from(el.options, o => o.text));
      let up = el.parentElement, p = parent;
      while (up) { if (pos.has(up)) { p = pos.get(up); break; } up = up.parentElement; }
      pos.set(el, els.length);
      els.push(el);
      out.push([norm(parts.join('\\n')), norm(el.textContent), p]);
      if (el.shadowRoot) visit(el.shadowRoot, els.length - 1);
    }
  };
  visit(document, -1);
  window.__portalqMaskables = els;
  return out;
}"""
_MARK_JS = """([indices, attr]) => {
  const els = window.__portalqMaskables || [];
  delete window.__portalqMaskables;
  for (const i of indices) if (els[i]) els[i].setAttribute(attr, '');
  return indices.length;
}"""
_UNMARK_JS = """(attr) => { for (const el of document.querySelectorAll('[' + attr + ']'))
  el.removeAttribute(attr); }"""


def _to_mask(elements: list[list[Any]], forms: list[str]) -> list[int]:
    """Positions of the elements to mask: any whose attributes or value show a form, and
    the innermost ones whose text does (a parent only when no child holds it whole)."""
    def shows(text: str) -> bool:
        return any(f in text for f in forms)

    text_hit = [shows(text) for _parts, text, _parent in elements]
    has_hit_child = set()
    for i, (_parts, _text, parent) in enumerate(elements):
        if text_hit[i] and parent >= 0:
            has_hit_child.add(parent)
    return [i for i, (parts, _text, _parent) in enumerate(elements)
            if shows(parts) or (text_hit[i] and i not in has_hit_child)]


class FrameUnreadable(Exception):
    """A frame of the page could not be checked for secret values: no screenshot."""


async def mark_secrets(page: Any, secrets: Iterable[str]) -> list[Any]:
    """Mark, in every frame of ``page``, the elements showing a secret value in any written
    form; the locators to mask. Raises :class:`FrameUnreadable` when a frame cannot be
    read (navigating, crashed, detached): its content is then unknown."""
    forms = secret_forms(secrets)
    masks = [page.locator(SENSITIVE_SELECTOR)]
    for frame in page.frames:
        try:
            elements = await frame.evaluate(_COLLECT_JS)
            await frame.evaluate(_MARK_JS, [_to_mask(elements, forms), MASK_ATTR])
        except Exception as exc:  # noqa: BLE001 - any failure: cannot prove it clean
            raise FrameUnreadable(f"frame {frame.name or frame.url[:60]!r}: "
                                  f"{type(exc).__name__}") from None
        masks.append(frame.locator(f"[{MASK_ATTR}]"))
    return masks


async def unmark_secrets(page: Any) -> None:
    for frame in page.frames:
        with suppress(Exception):
            await frame.evaluate(_UNMARK_JS, MASK_ATTR)


async def masked_screenshot(page: Any, path: Path, secrets: Iterable[str]) -> bool:
    """A full-page screenshot with every secret masked (by value in every frame, and by
    :data:`SENSITIVE_SELECTOR`). When a frame cannot be read, no screenshot is taken:
    raises :class:`FrameUnreadable` (the caller records missing evidence)."""
    masks = await mark_secrets(page, secrets)
    try:
        await page.screenshot(path=str(path), full_page=True, mask=masks)
    finally:
        await unmark_secrets(page)
    return True


class Evidence:
    """Numbered screenshots of one attempt, masked (by selector and by value). Best effort:
    a screenshot that cannot be taken (a frame that cannot be checked for secret values, a
    page gone) is recorded as missing evidence, and the flow goes on (evidence never
    decides an outcome)."""

    def __init__(self, ctx: FlowContext) -> None:
        self.ctx = ctx
        self.seq = 0

    async def shot(self, page: Any, name: str) -> bool:
        try:
            await self.take(page, name)
            return True
        except Exception as exc:  # noqa: BLE001 - evidence never decides an outcome
            note_missing(self.ctx.artifacts_dir, f"screenshot {name}", exc)
            return False

    async def take(self, page: Any, name: str) -> None:
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
async def browser_page(ctx: FlowContext, *,
                       accept_dialogs: bool = False) -> AsyncIterator[tuple[Any, Evidence]]:
    """A page in a fresh browser context; a masked screenshot on failure; Playwright
    errors become retryable errors; every outcome's message has the secrets redacted.
    The context's trace is kept per the trace policy (see :mod:`portals.flows.browser`).
    ``accept_dialogs``: accept alert/confirm dialogs (else Playwright dismisses them)."""
    from playwright.async_api import Error as PlaywrightError

    context = await ctx.new_browser_context()
    evidence = Evidence(ctx)
    failed = True
    try:
        page = await context.new_page()
        if accept_dialogs:
            page.on("dialog", lambda dialog: dialog.accept())
        try:
            yield page, evidence
            failed = False
        except HandlerOutcome as exc:
            exc.args = tuple(redact(str(a), ctx.secrets()) for a in exc.args)
            await _failure_shot(page, evidence)
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
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    text = str(exc)
    if "net::ERR_" in text or "NS_ERROR_" in text:
        return True
    lowered = text.lower()
    return isinstance(exc, PlaywrightTimeout) and any(
        w in lowered for w in ("goto", "navigation", "wait_for_load_state", "waiting for url"))


async def _failure_shot(page: Any, evidence: Evidence) -> None:
    """Best effort: a page mid-navigation (e.g. after a dropped connection) may refuse a
    screenshot once; wait for it to settle and try again; else it is missing evidence."""
    for last in (False, True):
        try:
            await evidence.take(page, "failure")
            return
        except Exception as exc:  # noqa: BLE001 - must not hide the outcome being raised
            if last:
                note_missing(evidence.ctx.artifacts_dir, "failure screenshot", exc)
                return
            with suppress(Exception):
                await page.wait_for_load_state("load", timeout=3000)


class ConnectionLost(PortalUnavailable):
    """The page's document request failed (connection dropped or reset): the portal's
    answer is unknown."""


async def click_and_wait(page: Any, target: Any, *, timeout: float | None = None) -> int | None:
    """Click ``target`` and wait for the page load it causes.

    Returns the final document's HTTP status; raises :class:`ConnectionLost` as soon as the
    main document request fails, and Playwright's TimeoutError if nothing loads in time.
    """
    failed: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def on_failed(request: Any) -> None:
        if (not failed.done() and request.is_navigation_request()
                and request.frame == page.main_frame):
            failed.set_result(request.failure or "request failed")

    async def navigate() -> Any:
        async with page.expect_navigation(timeout=timeout) as info:
            await target.click(timeout=timeout)
        return await info.value

    page.on("requestfailed", on_failed)
    nav = asyncio.ensure_future(navigate())
    try:
        await asyncio.wait({nav, failed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        page.remove_listener("requestfailed", on_failed)
    if not nav.done():
        nav.cancel()
        with suppress(BaseException):
            await nav
        raise ConnectionLost(f"connection lost: {failed.result()}")
    response = nav.result()
    return response.status if response is not None else None


async def control(page: Any, name: str) -> Any:
    """The button labelled exactly ``name``; a page without it means the portal changed
    (retryable: the next attempt starts over, and escalates after the last)."""
    button = page.get_by_role("button", name=name, exact=True)
    if await button.count() == 0:
        raise RetryableError(f"{name} control not found: portal changed?")
    return button


async def page_text(page: Any) -> str:
    """The visible text of the page, whitespace-normalised."""
    return " ".join((await page.locator("body").inner_text()).split())


def check_pdf(name: str, data: bytes) -> bytes:
    if not data.startswith(b"%PDF-"):
        raise RetryableError(f"{name} is not a PDF (download corrupt or an error page)")
    return data


async def download(page: Any, link: Any, workdir: Path | None = None) -> tuple[str, bytes]:
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


async def fetch_document(ctx: FlowContext, url: str) -> tuple[str, bytes]:
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


async def has_document(ctx: FlowContext, name: str) -> bool:
    return any(doc[0] == name for doc in await ctx.documents_of(ctx.job_id))


def next_midnight(tz: str, now: datetime | None = None) -> datetime:
    """Midnight starting the next calendar day in ``tz`` (aware), DST-correct."""
    tzinfo = zone(tz)
    local = (now or clock.now()).astimezone(tzinfo)
    return datetime.combine(local.date() + timedelta(days=1), time(0), tzinfo=tzinfo)
