"""The flow toolkit's page objects: :class:`PortalPage` (every portal flow stands on it),
:class:`WordedPage` (portals whose pages carry no marks, read by their words: the US ones)
and :func:`absolute_url`.

:class:`PortalPage` wraps one tab: every navigation waits for the new document, then reads
the page (:class:`Signals`, one round trip) and raises the matching outcome
(:meth:`PortalPage.verdict`):

=============================  ===========================================================
signed out / sign-in form      ``SessionLost`` (the flow signs in again)
closed notice                  ``PortalClosed()`` (deferred to the next opening)
maintenance page               ``PortalClosed(outage=True)``
session expired                ``RetryableError``
system error                   ``PortalUnavailable`` (an outage sign), or the portal's own
                               meaning of its code (:meth:`PortalPage.system_error`)
HTTP 5xx                       ``PortalUnavailable``
form error (``role=alert``)    ``BusinessError`` with the portal's text
expected control / step        ``PortalChanged("... portal changed?")`` (portal paused)
alert/confirm dialog           accepted, noted in ``dialogs``, the flow continues
=============================  ===========================================================

Submissions past the point of no return go through :meth:`PortalPage.submit_final`: a
broken connection or a page that is neither a confirmation nor a recognised error means
"outcome unknown" — a :class:`RetryableError` whose retry reconciles through the portal's
lookup (the caller entered its submission first: ``async with ctx.submission(...)``).
A portal without a lookup reads the answer itself (:meth:`PortalPage.verdict`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlparse

from pydantic import BaseModel

from portalq.jobs.errors import (
    BusinessError,
    PortalChanged,
    PortalClosed,
    PortalUnavailable,
    RetryableError,
)
from portalq.portals.flows.base import AppWatch, ConnectionLost, Evidence, check_pdf, click_and_wait
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.masking import redact
from portalq.portals.flows.signin import SessionLost

if TYPE_CHECKING:
    from playwright.async_api import Dialog, Locator, Page

log = logging.getLogger("portalq.flows")
#: how long a control may take to appear once its page is known to be ready (ms): the page
#: renders its controls with it, so a longer wait would only turn a changed page into a
#: Playwright timeout (15 s, retried as an error) instead of the drift stop
CONTROL_MS = 2000


#: everything :class:`PortalPage` reads of a loaded page, in one round trip: the portal's
#: own marks (BC, CRTC), its visible text and heading (the US portals have no marks), and
#: the current step (the progress item's own text, without a screen-reader suffix)
_PAGE_JS = """() => {
  const q = (s) => document.querySelector(s);
  const text = (s) => (q(s) ? q(s).innerText : null);
  const step = q('ol.progress li[aria-current=step]');
  return {closed: text('#portal-closed'), maintenance: !!q('#maintenance'),
          expired: !!q('#session-expired'),
          error: q('#system-error') ? q('#system-error').dataset.code || '' : null,
          alert: text('[role=alert]'), errorText: text('.error'), heading: text('h1'),
          step: step ? [...step.childNodes].filter((n) => n.nodeType === 3)
                                          .map((n) => n.textContent).join(' ') : null,
          text: document.body ? document.body.innerText : '',
          signedOut: q('#signed-out') ? (q('#signed-out').dataset.reason || 'signed_out')
                                      : (q('#signin-form') ? 'signed_out' : null)};
}"""


def _norm(text: str | None) -> str | None:
    return None if text is None else " ".join(text.split())


@dataclass(frozen=True)
class Signals:
    """What a loaded page says of itself (texts whitespace-normalised)."""

    text: str = ""                  #: the visible text
    step: str | None = None         #: the current step; None: the page shows no step
    signed_out: str | None = None   #: the portal ended the signed-in session (why)
    closed: str | None = None       #: the closed notice
    maintenance: bool = False
    expired: str | None = None      #: the session ran out, in the portal's words
    error: str | None = None        #: a system error's code ("" when it gives none)
    refused: str | None = None      #: a form error or refusal, in the portal's words


@dataclass(frozen=True)
class Verdict:
    """What a page that is not the expected one means: ``kind`` names the portal's answer
    (``closed``, ``maintenance``, ``expired``, ``signed_out``, ``refused``, a system error's
    code) or ``http`` (only an HTTP status: no answer of the portal's own)."""

    kind: str
    outcome: Exception


def absolute_url(page_url: str, href: str) -> str:
    """``href`` as found on the page at ``page_url`` (a link to a letter or certificate)."""
    return urljoin(page_url, href)


class PortalPage:
    """One tab on one portal. Subclasses say how the portal is named in messages
    (``name``), where its current step shows (``step_from``) and, for portals without marks
    on their pages, how their words read (:meth:`read`)."""

    #: "progress": the progress list's current item; "heading": the page's <h1>
    step_from = "progress"
    #: a control the flow needs is missing (``{portal}``, ``{role}``, ``{control}``, ``{where}``)
    missing_control = "{portal}: no {role} {control!r} on {where} — portal changed?"

    def __init__(self, ctx: FlowContext[BaseModel], page: Page, evidence: Evidence, portal: str,
                 name: str | None = None) -> None:
        self.ctx, self.page, self.evidence, self.portal = ctx, page, evidence, portal
        self.name = name or portal
        self.dialogs: list[str] = []
        page.on("dialog", self._accept_dialog)

    async def _accept_dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(self.clean(dialog.message))
        log.info("%s: accepted a %s dialog: %s", self.portal, dialog.type, self.dialogs[-1])
        await dialog.accept()

    def clean(self, text: str) -> str:
        return redact(" ".join(text.split()), self.ctx.secrets())

    async def shot(self, name: str) -> None:
        await self.evidence.shot(self.page, name)

    # ---- reading a page -------------------------------------------------------------------
    async def signals(self) -> Signals:
        raw = await self.page.evaluate(_PAGE_JS)
        return self.read({k: _norm(v) if isinstance(v, str) else v for k, v in raw.items()})

    def read(self, raw: dict[str, Any]) -> Signals:
        """The page's signals from what :data:`_PAGE_JS` found: by the portal's marks."""
        return Signals(text=raw["text"] or "", step=self._step(raw),
                       signed_out=raw["signedOut"], closed=raw["closed"],
                       maintenance=raw["maintenance"],
                       expired="session expired" if raw["expired"] else None,
                       error=raw["error"], refused=raw["alert"])

    def _step(self, raw: dict[str, Any]) -> str | None:
        step = raw["heading"] if self.step_from == "heading" else raw["step"]
        return None if step is None else str(step)

    def verdict(self, s: Signals, status: int | None, where: str) -> Verdict | None:
        """What the page means, if it is an answer rather than a form to go on with."""
        if s.signed_out is not None:   # the portal ended the signed-in session
            return Verdict("signed_out", SessionLost(s.signed_out))
        if s.closed is not None:
            return Verdict("closed", PortalClosed(f"{self.name} closed: {self.clean(s.closed)}"))
        if s.maintenance:
            return Verdict("maintenance", PortalClosed(f"{self.name} in maintenance",
                                                       outage=True))
        if s.expired is not None:
            return Verdict("expired", RetryableError(f"{self.name}: {s.expired} at {where}"))
        if s.error is not None:
            return Verdict(s.error or "error", self.system_error(s, where))
        if status is not None and status >= 500:
            return Verdict("http", PortalUnavailable(f"{self.name}: HTTP {status} at {where}"))
        if s.refused is not None:
            return Verdict("refused", BusinessError(
                f"{self.name} rejected {where}: {self.clean(s.refused)}"))
        return None

    def system_error(self, s: Signals, where: str) -> Exception:
        """The outcome of a system error page (an outage sign, unless a portal knows better)."""
        return PortalUnavailable(f"{self.name}: system error {s.error} at {where}")

    async def check(self, status: int | None, where: str) -> None:
        """Raise what the page means, if it is an answer of the portal's."""
        if (found := self.verdict(await self.signals(), status, where)) is not None:
            raise found.outcome

    async def expect_step(self, label: str, status: int | None = None) -> None:
        """Confirm that ``label`` is the current step; else raise what the page means (the
        portal's answer, or a changed portal)."""
        s = await self.signals()
        if s.step == label:
            return
        if (found := self.verdict(s, status, s.step or label)) is not None:
            raise found.outcome
        raise PortalChanged(f"{self.name}: expected step {label!r}, the page shows "
                            f"{s.step or 'no step'!r} — portal changed?", where=label,
                            expected=f"the step {label!r}")

    # ---- navigation ---------------------------------------------------------------------
    async def goto(self, url: str, where: str) -> int | None:
        response = await self.page.goto(url)
        status = response.status if response is not None else None
        await self.check(status, where)
        return status

    async def control(self, name: str, where: str, role: str = "button") -> Locator:
        """The control the flow needs; its absence on a loaded page means a redesign."""
        locator = self.page.get_by_role(role, name=name, exact=True)  # type: ignore[arg-type]
        if not await locator.count():
            raise PortalChanged(self.missing_control.format(
                portal=self.name, role=role, control=name, where=where), where=where,
                expected=f'- {role} "{name}"')
        return locator.first

    async def click(self, button: str, where: str) -> int | None:
        """Click the ``button`` and wait for the page it loads; its HTTP status. A dropped
        connection raises :class:`ConnectionLost` at once."""
        return await click_and_wait(self.page, await self.control(button, where))

    async def submit(self, button: str, where: str) -> None:
        """Click the form's ``button`` and wait for the answer page; raise its outcome."""
        await self.check(await self.click(button, where), where)

    async def submit_final(self, button: str, where: str, done: str) -> None:
        """Like :meth:`submit` for the point of no return: no answer, or an answer without
        the ``done`` element, is an unknown outcome, never a silent success or failure."""
        # playwright only when a browser is needed: the CLI and enqueue never load it
        from playwright.async_api import Error as PlaywrightError

        control = await self.control(button, where)
        try:
            status = await click_and_wait(self.page, control)
        except (ConnectionLost, PlaywrightError) as exc:
            raise RetryableError(
                f"{self.name}: no answer after {where} ({self.clean(str(exc).splitlines()[0])})"
                "; outcome unknown, the next attempt reconciles via the portal's lookup"
            ) from None
        await self.check(status, where)
        if not await self.page.locator(done).count():
            raise RetryableError(f"{self.name}: unrecognised answer after {where}; outcome "
                                 "unknown, the next attempt reconciles via the portal's lookup")

    # ---- reading and filling ---------------------------------------------------------------
    async def text(self, selector: str, where: str, pattern: str | None = None) -> str:
        locator = self.page.locator(selector)
        value = (await locator.first.inner_text()).strip() if await locator.count() else ""
        if not value or (pattern and not re.fullmatch(pattern, value)):
            raise PortalChanged(f"{self.name}: no valid {selector} on {where} "
                                f"({value!r}) — portal changed?", where=where,
                                expected=f"{selector}" + (f" matching {pattern}" if pattern
                                                          else ""))
        return value

    def here(self) -> str:
        """Where the page is, for messages: the last part of its path."""
        return urlparse(self.page.url).path.rstrip("/").rsplit("/", 1)[-1] or "the page"

    async def present(self, locator: Locator, control: str, role: str,
                      where: str | None = None) -> Locator:
        """``locator``'s first match, once it is on the page; missing after
        :data:`CONTROL_MS` it is a changed portal naming ``control`` (never a timeout)."""
        # playwright only when a browser is needed: the CLI and enqueue never load it
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        try:
            await locator.first.wait_for(state="attached", timeout=CONTROL_MS)
        except PlaywrightTimeout:
            where = where or self.here()
            raise PortalChanged(self.missing_control.format(
                portal=self.name, role=role, control=control, where=where), where=where,
                expected=f'- {role} "{control}"') from None
        return locator.first

    async def fill(self, label: str, value: str | int | None, *, exact: bool = True) -> None:
        """Type ``value`` into the field labelled ``label`` (or whose label starts so)."""
        field = await self.present(self.page.get_by_label(label, exact=exact), label, "textbox")
        await field.fill("" if value is None else str(value))

    async def pdf(self, href: str, what: str) -> bytes:
        """Download ``href`` (relative to the current page) with the page's cookies; it must
        be a real PDF. A closed or maintenance page instead is that outcome."""
        response = await self.page.request.get(urljoin(self.page.url, href))
        body = bytes(await response.body())
        if b'id="signed-out"' in body or b'id="signin-form"' in body:
            raise SessionLost("signed_out")
        if b'id="portal-closed"' in body:
            raise PortalClosed(f"{self.name} closed (downloading {what})")
        if b'id="maintenance"' in body:
            raise PortalClosed(f"{self.name} in maintenance (downloading {what})", outage=True)
        if response.status != 200:
            raise RetryableError(f"{self.name}: {what} download failed (HTTP "
                                 f"{response.status})")
        return check_pdf(f"{self.name}: {what}", body)

    async def select(self, label: str, value: str) -> bool:
        """Choose ``value`` in the select labelled ``label``; False if it is not offered."""
        control = await self.present(self.page.get_by_label(label, exact=True), label,
                                     "combobox")
        if not await control.locator(f"option[value='{value}']").count():
            return False
        await control.select_option(value)
        return True


class WordedPage(PortalPage):
    """A portal whose pages carry no marks (the US ones): its signals are read from its
    words. Subclasses may add to the phrases, or read more in :meth:`read`."""

    missing_control = "{control} control not found: portal changed?"
    closed_phrases: tuple[str, ...] = ("not available at this time",)
    maintenance_phrases: tuple[str, ...] = ("Scheduled maintenance",)
    #: phrase on the page -> the session's end in the portal's words
    expired_phrases: tuple[tuple[str, str], ...] = (("Session expired", "session expired"),
                                                    ("session has expired", "session expired"))

    def read(self, raw: dict[str, Any]) -> Signals:
        text = raw["text"] or ""
        return Signals(
            text=text, step=self._step(raw), signed_out=raw["signedOut"],
            closed=next((p for p in self.closed_phrases if p in text), None),
            maintenance=any(p in text for p in self.maintenance_phrases),
            expired=next((words for p, words in self.expired_phrases if p in text), None),
            refused=raw["alert"])


# ---- single-page apps ------------------------------------------------------------------------

#: what :class:`AppPage` reads of a single-page app's current state, in one round trip
_APP_JS = """() => {
  const t = (n) => (n ? n.innerText : null);
  const active = [...document.querySelectorAll('li.stepIndicator-item .sr-only')]
    .map((n) => n.textContent.trim())
    .find((s) => s.endsWith(' active') && !s.endsWith(' not active'));
  const live = [...document.querySelectorAll('[aria-live=polite]')]
    .find((n) => n.querySelector('h2'));
  const dialog = [...document.querySelectorAll('[role=dialog]')]
    .find((n) => n.getClientRects().length);
  return {route: location.pathname, step: active ? active.slice(0, -' active'.length) : null,
          stepHeading: t(document.querySelector('h2.stepIndicator-heading')),
          answer: live ? t(live.querySelector('h2')) : null, answerText: t(live),
          dialog: t(dialog), heading: t(document.querySelector('h1')), title: document.title,
          text: document.body ? document.body.innerText : ''};
}"""


@dataclass(frozen=True)
class AppState:
    """What a single-page app shows now (texts whitespace-normalised)."""

    route: str                      #: the last part of the path ("" for the app's root)
    step: str | None = None         #: the step indicator's active label
    step_heading: str | None = None
    answer: str | None = None       #: an inline answer's heading (``[aria-live=polite] h2``)
    answer_text: str = ""           #: the whole inline answer
    dialog: str | None = None       #: a visible ``role=dialog``'s text
    heading: str | None = None
    title: str = ""
    text: str = ""


class AppPage(PortalPage):
    """One tab on a single-page app: a step ends when the app shows its next state
    (:func:`portals.flows.base.click_and_settle`), and the page is read as an
    :class:`AppState`. The flow says what each state means."""

    #: how long one step may take before the wait is judged (ms)
    step_timeout_ms: float = 30_000

    async def state(self) -> AppState:
        raw = await self.page.evaluate(_APP_JS)
        norm = {k: _norm(v) if isinstance(v, str) else v for k, v in raw.items()}
        return AppState(route=raw["route"].rstrip("/").rsplit("/", 1)[-1], step=norm["step"],
                        step_heading=norm["stepHeading"], answer=norm["answer"],
                        answer_text=norm["answerText"] or "", dialog=norm["dialog"],
                        heading=norm["heading"], title=norm["title"] or "",
                        text=norm["text"] or "")

    async def advance(self, control: Locator, where: str, *,
                      timeout_ms: float | None = None) -> str:
        """Click ``control``; the kind of the app's next state (a dialog the flow answers
        through :meth:`answer_dialog` does not end the wait)."""
        limit = timeout_ms or self.step_timeout_ms
        async with AppWatch(self.page) as watch:
            await control.click()
            while True:
                kind = await watch.next_state(limit, where)
                if kind != "dialog" or not await self.answer_dialog():
                    return kind

    async def answer_dialog(self) -> bool:
        """Answer a dialog the app raised (e.g. an idle warning); False if it is not one the
        flow knows (then it is the next state)."""
        return False

    async def button(self, name: str, where: str) -> Locator:
        """A button or link-button named ``name`` (an ``<a role=button>`` counts)."""
        return await self.control(name, where)
