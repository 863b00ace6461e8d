"""The flow toolkit's page objects: :class:`PortalPage` (the BC Registries and CRTC flows
stand on it) and :func:`absolute_url` (every flow).

:class:`PortalPage` wraps one tab: every navigation waits for the new document, then reads
the page for the portal's own signals and raises the matching outcome:

=============================  ===========================================================
closed notice                  ``PortalClosed()`` (deferred to the next opening)
maintenance page               ``PortalClosed(outage=True)``
system error / HTTP 5xx        ``PortalUnavailable`` (an outage sign)
session expired                ``RetryableError``
expected control missing       ``RetryableError("... portal changed?")``
form error (``role=alert``)    ``BusinessError`` with the portal's text
alert/confirm dialog           accepted, noted in ``dialogs``, the flow continues
=============================  ===========================================================

Submissions past the point of no return go through :meth:`PortalPage.submit_final`: a
broken connection or a page that is neither a confirmation nor a recognised error means
"outcome unknown" — a :class:`RetryableError` whose retry reconciles through the portal's
lookup (the caller entered its submission first: ``async with ctx.submission(...)``).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from jobs.errors import BusinessError, PortalClosed, PortalUnavailable, RetryableError
from portals.flows.base import Evidence, check_pdf, redact
from portals.flows.context import FlowContext

if TYPE_CHECKING:
    from playwright.async_api import Dialog, Page

log = logging.getLogger("portalq.flows")


#: the portal's own signals on a loaded page, read in one round trip
_SIGNALS_JS = """() => {
  const q = (s) => document.querySelector(s);
  const text = (s) => (q(s) ? q(s).innerText : null);
  return {closed: text('#portal-closed'), maintenance: !!q('#maintenance'),
          expired: !!q('#session-expired'),
          error: q('#system-error') ? q('#system-error').dataset.code || '' : null,
          alert: text('[role=alert]'),
          signedOut: q('#signed-out') ? (q('#signed-out').dataset.reason || 'signed_out')
                                      : (q('#signin-form') ? 'signed_out' : null)};
}"""


def absolute_url(page_url: str, href: str) -> str:
    """``href`` as found on the page at ``page_url`` (a link to a letter or certificate)."""
    return urljoin(page_url, href)


class PortalPage:
    def __init__(self, ctx: FlowContext, page: Page, evidence: Evidence, portal: str) -> None:
        self.ctx, self.page, self.evidence, self.portal = ctx, page, evidence, portal
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

    # ---- navigation ---------------------------------------------------------------------
    async def goto(self, url: str, where: str) -> None:
        response = await self.page.goto(url)
        await self.check(response, where)

    async def submit(self, button: str, where: str) -> None:
        """Click the form's ``button`` and wait for the answer page; raise its outcome."""
        control = await self.control("button", button, where)
        async with self.page.expect_navigation() as navigation:
            await control.click()
        await self.check(await navigation.value, where)

    async def submit_final(self, button: str, where: str, done: str) -> None:
        """Like :meth:`submit` for the point of no return: no answer, or an answer without
        the ``done`` element, is an unknown outcome, never a silent success or failure."""
        from playwright.async_api import Error as PlaywrightError

        control = await self.control("button", button, where)
        try:
            async with self.page.expect_navigation() as navigation:
                await control.click()
            response = await navigation.value
        except PlaywrightError as exc:
            raise RetryableError(
                f"{self.portal}: no answer after {where} ({self.clean(str(exc).splitlines()[0])})"
                "; outcome unknown, the next attempt reconciles via the portal's lookup"
            ) from None
        await self.check(response, where)
        if not await self.page.locator(done).count():
            raise RetryableError(f"{self.portal}: unrecognised answer after {where}; outcome "
                                 "unknown, the next attempt reconciles via the portal's lookup")

    async def control(self, role: str, name: str, where: str) -> Any:
        """The control the flow needs; its absence on a loaded page means a redesign."""
        locator = self.page.get_by_role(role, name=name, exact=True)  # type: ignore[arg-type]
        if not await locator.count():
            raise RetryableError(f"{self.portal}: no {role} {name!r} on {where} — portal changed?")
        return locator.first

    async def check(self, response: Any, where: str) -> None:
        signals = await self.page.evaluate(_SIGNALS_JS)
        if signals["signedOut"] is not None:   # the portal ended the signed-in session
            from portals.flows.signin import SessionLost

            raise SessionLost(signals["signedOut"])
        if signals["closed"] is not None:
            raise PortalClosed(f"{self.portal} closed: {self.clean(signals['closed'])}")
        if signals["maintenance"]:
            raise PortalClosed(f"{self.portal} in maintenance", outage=True)
        if signals["expired"]:
            raise RetryableError(f"{self.portal}: session expired at {where}")
        if signals["error"] is not None:
            raise PortalUnavailable(f"{self.portal}: system error {signals['error']} at {where}")
        if response is not None and response.status >= 500:
            raise PortalUnavailable(f"{self.portal}: HTTP {response.status} at {where}")
        if signals["alert"] is not None:
            raise BusinessError(f"{self.portal} refused {where}: {self.clean(signals['alert'])}")

    # ---- reading and filling ---------------------------------------------------------------
    async def expect_step(self, label: str) -> None:
        """Confirm from the progress indicator that ``label`` is the current step."""
        current = self.page.locator("ol.progress li[aria-current=step]")
        text = (await current.inner_text()).strip() if await current.count() else ""
        if text != label:
            raise RetryableError(f"{self.portal}: expected step {label!r}, the page shows "
                                 f"{text or 'no step'!r} — portal changed?")

    async def text(self, selector: str, where: str, pattern: str | None = None) -> str:
        locator = self.page.locator(selector)
        value = (await locator.first.inner_text()).strip() if await locator.count() else ""
        if not value or (pattern and not re.fullmatch(pattern, value)):
            raise RetryableError(f"{self.portal}: no valid {selector} on {where} "
                                 f"({value!r}) — portal changed?")
        return value

    async def fill(self, label: str, value: Any) -> None:
        await self.page.get_by_label(label, exact=True).fill("" if value is None else str(value))

    async def pdf(self, href: str, what: str) -> bytes:
        """Download ``href`` (relative to the current page) with the page's cookies; it must
        be a real PDF. A closed or maintenance page instead is that outcome."""
        response = await self.page.request.get(urljoin(self.page.url, href))
        body = bytes(await response.body())
        if b'id="signed-out"' in body or b'id="signin-form"' in body:
            from portals.flows.signin import SessionLost

            raise SessionLost("signed_out")
        if b'id="portal-closed"' in body:
            raise PortalClosed(f"{self.portal} closed (downloading {what})")
        if b'id="maintenance"' in body:
            raise PortalClosed(f"{self.portal} in maintenance (downloading {what})", outage=True)
        if response.status != 200:
            raise RetryableError(f"{self.portal}: {what} download failed (HTTP "
                                 f"{response.status})")
        return check_pdf(f"{self.portal}: {what}", body)

    async def select(self, label: str, value: str) -> bool:
        """Choose ``value`` in the select labelled ``label``; False if it is not offered."""
        control = self.page.get_by_label(label, exact=True)
        if not await control.locator(f"option[value='{value}']").count():
            return False
        await control.select_option(value)
        return True
