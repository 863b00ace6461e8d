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
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from portalq.jobs.errors import BusinessError, DeferUntil, RetryableError, UncertainOutcome
from portalq.portals.flows.base import (
    ConnectionLost,
    Evidence,
    browser_page,
    click_and_wait,
    download,
    fetch_document,
    has_document,
    next_midnight,
)
from portalq.portals.flows.browser import untraced
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.pages import Signals, WordedPage, absolute_url
from portalq.portals.payloads import ObtainEinPayload

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page

PORTAL = "irs_ein"
SUBMISSION = "ein_application"
IRS_TZ = "America/New_York"
EIN_RE = r"\d{2}-\d{7}"
REFERENCE_RE = re.compile(r"Reference Number (\d{3})")
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


class EinAssistant(WordedPage):
    """Page object of the EIN Assistant: the toolkit's worded page, with the IRS's error
    reference numbers as its system errors."""

    def __init__(self, ctx: FlowContext, page: Page, evidence: Evidence) -> None:
        super().__init__(ctx, page, evidence, PORTAL, name="IRS")
        self.base = ctx.portal_urls[PORTAL].rstrip("/")

    def read(self, raw: dict[str, Any]) -> Signals:
        s = super().read(raw)
        found = REFERENCE_RE.search(s.text)
        return replace(s, error=found.group(1)) if found else s

    def system_error(self, s: Signals, where: str) -> Exception:
        """An error reference number: 109-113 are the IRS's own faults (starting over is
        safe), 101 for a second EIN the same day waits for tomorrow, others are refusals."""
        code, found = s.error or "", REFERENCE_RE.search(s.text)
        detail = s.text[: found.start() if found else None].split("EIN Assistant", 1)[-1].strip()
        if "109" <= code <= "113":
            return RetryableError(f"IRS error {code}: {detail}")
        if code == "101" and "per responsible party per day" in s.text:
            when = next_midnight(IRS_TZ)
            return DeferUntil(f"IRS error 101: one EIN per responsible party per day; retry "
                              f"on {when.date().isoformat()}", when=when)
        return BusinessError(f"IRS error {code}: {detail}")

    async def next(self, label: str, shot: str) -> None:
        """Screenshot, Continue, confirm the next step ``label``."""
        await self.shot(shot)
        await self.expect_step(label, await self.click("Continue", shot))

    async def choose(self, label: str, value: str) -> None:
        """Choose ``value`` in the select labelled ``label`` (it may appear only once an
        earlier choice is made); a value the IRS does not offer (e.g. a state outside the
        US) is a business error, not a wait for a timeout."""
        await self.page.get_by_label(label, exact=True).wait_for()
        if not await self.select(label, value):
            raise BusinessError(f"IRS EIN Assistant offers no {label!r} option {value!r}")

    async def radio(self, text: str) -> None:
        # the inputs ignore clicks: only the <label> registers a choice
        await self.page.locator("label").filter(
            has_text=re.compile(rf"^\s*{re.escape(text)}\s*$")).click()

    async def open(self) -> None:
        await self.goto(f"{self.base}/", "the landing page")
        begin = await self.control("Begin Application", "the landing page")
        await self.shot("landing")
        await self.expect_step("Legal Structure", await click_and_wait(self.page, begin))

    async def legal_structure(self, p: ObtainEinPayload) -> None:
        await self.radio(STRUCTURES[p.legal_structure])
        if p.legal_structure in ("LLC", "PARTNERSHIP"):  # appears once the structure is chosen
            await self.fill("How many members?", p.members)
        await self.choose("State where located", p.state)
        await self.radio(REASONS[p.reason])  # appears once the state is chosen
        await self.next("Identity", "legal-structure")

    async def identity(self, p: ObtainEinPayload) -> None:
        rp = p.responsible_party
        await self.fill("First name", rp.first_name)
        await self.fill("Middle name", rp.middle_name)
        await self.fill("Last name", rp.last_name)
        await self.fill("Suffix", rp.suffix)
        await self.fill("SSN/ITIN", re.sub(r"\D", "", rp.tax_id()))
        await self.radio("Yes")
        await self.next("Addresses", "identity")

    async def addresses(self, p: ObtainEinPayload) -> None:
        a = p.address
        await self.fill("Street address", a.street)
        await self.fill("City", a.city)
        await self.choose("State", a.region)
        await self.fill("ZIP code", a.postal_code)
        await self.fill("Phone number", p.phone)
        await self.next("Additional Details", "addresses")

    async def details(self, p: ObtainEinPayload) -> None:
        await self.fill("Legal name of the entity", p.legal_name)
        await self.choose("Start month", str(p.start_month))
        await self.fill("Start year", p.start_year)
        await self.choose("Closing month of accounting year", str(p.closing_month))
        await self.fill("Expected number of employees", p.expected_employees)
        await self.fill("Principal activity", p.principal_activity)
        await self.next("Review & Submit", "details")

    async def submit_control(self) -> Locator:
        await self.shot("review")
        return await self.control("Submit", "the review")

    async def apply(self, button: Locator) -> tuple[str, str]:
        """Past the point of no return: (EIN, CP 575 URL), or Refused (the IRS's own
        answer), or UncertainOutcome (no answer, or none the toolkit recognises)."""
        from playwright.async_api import Error as PlaywrightError

        try:
            status = await click_and_wait(self.page, button)
            s = await self.signals()
            if s.step != "EIN Assignment":
                found = self.verdict(s, status, s.step or "the submission")
                if found is not None and found.kind not in ("http", "signed_out"):
                    raise Refused(found.kind, found.outcome)
                raise RetryableError(str(found.outcome) if found else
                                     f"IRS shows step {s.step!r}, expected 'EIN Assignment'")
            ein = await self.text("#ein", "the EIN Assignment", EIN_RE)
            href = await self.page.locator("#cp575").get_attribute("href") or ""
        except Refused:
            raise
        except (ConnectionLost, PlaywrightError, RetryableError) as exc:
            raise UncertainOutcome(
                f"IRS EIN application submitted but no answer was received "
                f"({str(exc).splitlines()[0]}); the IRS offers no lookup: check for an issued "
                f"EIN before retrying") from None
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
    async with browser_page(ctx) as (page, evidence):
        irs = EinAssistant(ctx, page, evidence)
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
                    ein, letter_url = await irs.apply(button)
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
