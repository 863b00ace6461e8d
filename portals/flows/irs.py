"""``obtain_ein``: an EIN from the IRS EIN Assistant, and its CP 575 letter.

Submission ``ein_application`` (jobs/submission.py): confirmed with ``ein`` and
``legal_name``; refused with the IRS reference number (e.g. "109": starting over is safe).
Checkpoints besides it: ``cp575_url`` (sealed: the letter's link opens it for anyone),
``last_error``, ``documents``.

The IRS has no lookup: after the click without an EIN nobody can tell whether an EIN was
issued, so a retry raises UncertainOutcome (a second application would mean a second EIN or
error 101). The identity -> review -> submit part never appears in a trace (``untraced``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from jobs.errors import (
    BusinessError,
    DeferUntil,
    PortalClosed,
    PortalUnavailable,
    RetryableError,
    UncertainOutcome,
)
from portals.flows.base import (
    ConnectionLost,
    Evidence,
    browser_page,
    click_and_wait,
    control,
    download,
    fetch_document,
    has_document,
    next_midnight,
    page_text,
)
from portals.flows.browser import untraced
from portals.flows.context import FlowContext
from portals.flows.pages import absolute_url
from portals.payloads import ObtainEinPayload

if TYPE_CHECKING:
    from playwright.async_api import Page

PORTAL = "irs_ein"
SUBMISSION = "ein_application"
IRS_TZ = "America/New_York"
EIN_RE = re.compile(r"^\d{2}-\d{7}$")
STRUCTURES = {"LLC": "Limited Liability Company (LLC)", "CORPORATION": "Corporation",
              "PARTNERSHIP": "Partnership", "SOLE_PROPRIETOR": "Sole Proprietor"}
REASONS = {"NEW_BUSINESS": "Started a new business", "HIRED_EMPLOYEES": "Hired employees",
           "BANKING_NEEDS": "Banking purposes",
           "CHANGING_LEGAL_STRUCTURE": "Changed type of organization",
           "PURCHASED_BUSINESS": "Purchased active business"}


class Refused(Exception):
    """The IRS answered a submission with a definite refusal (nothing was issued)."""

    def __init__(self, code: str, outcome: Exception) -> None:
        super().__init__(code)
        self.code, self.outcome = code, outcome


class EinAssistant:
    """Page object of the EIN Assistant."""

    def __init__(self, page: Page, base_url: str, evidence: Evidence) -> None:
        self.page, self.base, self.evidence = page, base_url.rstrip("/"), evidence

    async def classify(self, status: int | None) -> None:
        """Raise what a non-form page means: :class:`Refused` for a definite answer of the
        portal (closed, maintenance, session expired, an error reference number)."""
        text = await page_text(self.page)
        if "not available at this time" in text:
            raise Refused("closed", PortalClosed("IRS EIN Assistant: not available at this time"))
        if "Scheduled maintenance" in text:
            raise Refused("maintenance", PortalClosed("IRS EIN Assistant: scheduled maintenance",
                                                      outage=True))
        if "Session expired" in text or "session has expired" in text:
            raise Refused("expired", RetryableError(
                "IRS session expired (it cannot be saved); starting over is safe"))
        if m := re.search(r"Reference Number (\d{3})", text):
            code, detail = m.group(1), text[: m.start()].split("EIN Assistant", 1)[-1].strip()
            if "109" <= code <= "113":
                raise Refused(code, RetryableError(f"IRS error {code}: {detail}"))
            if code == "101" and "per responsible party per day" in text:
                when = next_midnight(IRS_TZ)
                raise Refused(code, DeferUntil(
                    f"IRS error 101: one EIN per responsible party per day; retry on "
                    f"{when.date().isoformat()}", when=when))
            raise Refused(code, BusinessError(f"IRS error {code}: {detail}"))
        if status is not None and status >= 500:
            raise PortalUnavailable(f"IRS EIN Assistant answered HTTP {status}")

    async def expect_step(self, label: str, status: int | None = None) -> None:
        """Confirm via the progress indicator that ``label`` is the current step."""
        current = self.page.locator("ol.progress li[aria-current=step]")
        if await current.count() == 0:
            await self.classify(status)
            raise RetryableError(f"IRS page without progress indicator (expected {label})")
        shown = " ".join((await current.text_content() or "").split())
        if shown != f"{label} active":
            alert = self.page.get_by_role("alert")
            if await alert.count():
                raise Refused("invalid", BusinessError(
                    f"IRS rejected {shown.removesuffix(' active')}: "
                    f"{await alert.first.inner_text()}"))
            raise RetryableError(f"IRS shows step {shown!r}, expected {label!r}")

    async def go(self, control: Any) -> int | None:
        return await click_and_wait(self.page, control)

    async def next(self, label: str, shot: str) -> None:
        """Screenshot, Continue, confirm the next step ``label``."""
        await self.evidence.shot(self.page, shot)
        button = await control(self.page, "Continue")
        try:
            await self.expect_step(label, await self.go(button))
        except Refused as refused:
            raise refused.outcome from None

    async def select(self, label: str, value: str) -> None:
        """Choose ``value`` in the select labelled ``label``; a value the IRS does not offer
        (e.g. a state outside the US) is a business error, not a wait for a timeout."""
        box = self.page.get_by_label(label, exact=True)
        await box.wait_for()
        if await box.locator(f"option[value={value!r}]").count() == 0:
            raise BusinessError(f"IRS EIN Assistant offers no {label!r} option {value!r}")
        await box.select_option(value)

    async def radio(self, text: str) -> None:
        # the inputs ignore clicks: only the <label> registers a choice
        await self.page.locator("label").filter(
            has_text=re.compile(rf"^\s*{re.escape(text)}\s*$")).click()

    async def open(self) -> None:
        response = await self.page.goto(f"{self.base}/")
        try:
            await self.classify(response.status if response else None)
        except Refused as refused:
            raise refused.outcome from None
        begin = self.page.get_by_role("button", name="Begin Application")
        if await begin.count() == 0:
            raise RetryableError("Begin Application not found: portal changed?")
        await self.evidence.shot(self.page, "landing")
        try:
            await self.expect_step("Legal Structure", await self.go(begin))
        except Refused as refused:
            raise refused.outcome from None

    async def legal_structure(self, p: ObtainEinPayload) -> None:
        await self.radio(STRUCTURES[p.legal_structure])
        if p.legal_structure in ("LLC", "PARTNERSHIP"):  # appears once the structure is chosen
            await self.page.get_by_label("How many members?").fill(str(p.members))
        await self.select("State where located", p.state)
        await self.radio(REASONS[p.reason])  # appears once the state is chosen
        await self.next("Identity", "legal-structure")

    async def identity(self, p: ObtainEinPayload) -> None:
        rp = p.responsible_party
        page = self.page
        await page.get_by_label("First name").fill(rp.first_name)
        await page.get_by_label("Middle name").fill(rp.middle_name or "")
        await page.get_by_label("Last name").fill(rp.last_name)
        await page.get_by_label("Suffix").fill(rp.suffix or "")
        await page.get_by_label("SSN/ITIN").fill(re.sub(r"\D", "", rp.tax_id()))
        await self.radio("Yes")
        await self.next("Addresses", "identity")

    async def addresses(self, p: ObtainEinPayload) -> None:
        page, a = self.page, p.address
        await page.get_by_label("Street address").fill(a.street)
        await page.get_by_label("City").fill(a.city)
        await self.select("State", a.region)
        await page.get_by_label("ZIP code").fill(a.postal_code)
        await page.get_by_label("Phone number").fill(p.phone)
        await self.next("Additional Details", "addresses")

    async def details(self, p: ObtainEinPayload) -> None:
        page = self.page
        await page.get_by_label("Legal name of the entity").fill(p.legal_name)
        await self.select("Start month", str(p.start_month))
        await page.get_by_label("Start year").fill(str(p.start_year))
        await self.select("Closing month of accounting year", str(p.closing_month))
        await page.get_by_label("Expected number of employees").fill(str(p.expected_employees))
        await page.get_by_label("Principal activity").fill(p.principal_activity)
        await self.next("Review & Submit", "details")

    async def submit_control(self) -> Any:
        await self.evidence.shot(self.page, "review")
        return await control(self.page, "Submit")

    async def submit(self, button: Any) -> tuple[str, str]:
        """Past the point of no return: (EIN, CP 575 URL), or Refused, or UncertainOutcome."""
        from playwright.async_api import Error as PlaywrightError

        try:
            status = await self.go(button)
            await self.expect_step("EIN Assignment", status)
            ein = (await self.page.locator("#ein").inner_text()).strip()
            href = await self.page.locator("#cp575").get_attribute("href") or ""
        except Refused:
            raise
        except (ConnectionLost, PlaywrightError, RetryableError) as exc:
            raise UncertainOutcome(
                f"IRS EIN application submitted but no answer was received "
                f"({str(exc).splitlines()[0]}); the IRS offers no lookup: check for an issued "
                f"EIN before retrying") from None
        if not EIN_RE.match(ein):
            raise UncertainOutcome(f"IRS EIN page shows no valid EIN ({ein!r})")
        return ein, absolute_url(self.page.url, href)


async def obtain_ein(ctx: FlowContext) -> dict[str, Any]:
    p = ObtainEinPayload.model_validate(dict(ctx.payload))
    sub = ctx.submission(SUBMISSION)
    if sub.confirmation is not None:
        return await _letter_only(ctx, sub.confirmation)
    if sub.in_doubt:
        raise UncertainOutcome(
            f"an earlier attempt submitted the EIN application ({sub.reference}) but no "
            f"EIN was recorded; the IRS offers no lookup, so it is not resubmitted")
    async with browser_page(ctx, accept_dialogs=True) as (page, evidence):
        irs = EinAssistant(page, ctx.portal_urls[PORTAL], evidence)
        await ctx.step("legal structure")
        await irs.open()
        await irs.legal_structure(p)
        async with untraced(page.context, secrets=ctx.secrets()):
            await ctx.step("identity")
            await irs.identity(p)
            await irs.addresses(p)
            await irs.details(p)
            await ctx.step("submit")
            button = await irs.submit_control()
            async with sub:
                try:
                    ein, letter_url = await irs.submit(button)
                except Refused as refused:
                    await sub.refused(refused.code)
                    await ctx.save_checkpoint(last_error=refused.code)
                    raise refused.outcome from None
                await sub.confirmed(also={"cp575_url": letter_url}, ein=ein,
                                    legal_name=p.legal_name)
        await ctx.step("letter")
        await evidence.shot(page, "ein-assignment")
        name, pdf = await download(page, page.locator("#cp575"), ctx.artifacts_dir)
    await ctx.store_document(name, "application/pdf", pdf)
    await ctx.save_checkpoint(documents=[name])
    return {"ein": ein, "legal_name": p.legal_name, "documents": [name]}


async def _letter_only(ctx: FlowContext, confirmation: Any) -> dict[str, Any]:
    """The EIN is known from an earlier attempt: never the portal again, only the letter."""
    url = ctx.checkpoints.get("cp575_url", "")
    name = url.rsplit("/", 1)[-1] if url else ""
    if name and not await has_document(ctx, name):
        name, pdf = await fetch_document(ctx, url)
        await ctx.store_document(name, "application/pdf", pdf)
        await ctx.save_checkpoint(documents=[name])
    return {"ein": confirmation["ein"], "legal_name": confirmation.get("legal_name", ""),
            "documents": [name] if name else []}
