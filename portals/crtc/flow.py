"""CRTC flow: register the company as a telecommunications service provider.

GCKey sign-in (when an account is configured) → the Telecom Cover Page (recognised by "No
activation code (AC) is required for telecom submission") → Attach Documents (the
registration letter, a PDF built from the payload: legal name and address, facilities or
not, the registration lists, ``letter_text``, the acknowledgement of obligations;
:mod:`.crtc_letter`) → the dated receipt (confirmation number, received time), or the
confirmation letter PDF once staff processed it.

Submission ``crtc_registration`` (jobs/submission.py), its reference the portal's "Your file
reference", confirmed with ``confirmation="CRTC-2026-000123"``.

A registry that queues answers with the dated receipt only (no letter yet): the job then
waits on the portal (portals/flows/wait_on_portal.py) until staff have processed it.

Registered once listed: the confirmation letter stored (``letter_document``, with when it
was seen), the job waits until the CRTC's public registration list shows the company's
legal name ("within 24 hours of the date the confirmation letter is sent"), checked on the
list's own rule (``crtc_listing`` in portals/lookups.py; past it, escalated once, still
checked); the result then carries ``listed_on``.

A retry of a confirmed or in-doubt submission first searches the portal's submissions by
that reference (read-only): found → that submission is the result (its letter is fetched
again); not found → confirmed: waits for staff; in doubt: what the CRTC's declared rule
allows (portals/lookups.py) -- "not found" is never conclusive, so it waits and, past the
window, goes to a person; it is never submitted again on a guess.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from portalq.jobs import clock
from portalq.jobs.errors import BusinessError, RetryableError
from portalq.jobs.submission import Submission
from portalq.portals.crtc.letter import NAME as LETTER
from portalq.portals.crtc.letter import letter_pdf
from portalq.portals.crtc.payload import ProcessCrtcPayload
from portalq.portals.flows import wait_on_portal as waiting
from portalq.portals.flows.base import Evidence, browser_page, page_text
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.pages import PortalPage
from portalq.portals.flows.signin import SessionLost, sign_in_with_account

if TYPE_CHECKING:
    from playwright.async_api import Page

log = logging.getLogger("portalq.flows")

PORTAL = "crtc"
KIND = "crtc_registration"
LISTING = "crtc_listing"   # the public list's rule (portals/lookups.py), after the letter
SERVICE_LABELS = {"reseller": "Reseller of telecommunications services",
                  "voip": "Local VoIP services", "long_distance": "Long distance services",
                  "internet": "Internet services"}
CONFIRMATION = r"CRTC-\d{4}-\d{6}"
NO_AC = "No activation code (AC) is required for telecom submission"


class CrtcPortal(PortalPage):
    def __init__(self, ctx: FlowContext[BaseModel], page: Page, evidence: Evidence) -> None:
        super().__init__(ctx, page, evidence, PORTAL)
        self.base = ctx.portal_urls[PORTAL].rstrip("/")

    async def find(self, reference: str) -> dict[str, Any] | None:
        await self.goto(f"{self.base}/submissions", "the submission search")
        await self.fill("Your file reference", reference)
        await self.submit("Search", "the submission search")
        await self.shot("lookup")
        rows = self.page.locator("tr.submission")
        if not await rows.count():
            return None
        return {"confirmation": await self.text("tr.submission .number", "the search",
                                                CONFIRMATION),
                "letter": await rows.first.locator("a.letter").get_attribute("href")}

    async def register(self, p: ProcessCrtcPayload, sub: Submission) -> dict[str, Any]:
        page = self.page
        pdf = letter_pdf(p)
        await self.goto(f"{self.base}/register", "the registration")
        await self.expect_step("Telecom Cover Page")
        if NO_AC not in " ".join((await page.locator("body").inner_text()).split()):
            # other submissions need an activation code by phone: not this flow's page
            raise RetryableError(f"{PORTAL}: the Telecom cover page does not say "
                                 f"{NO_AC!r} — portal changed?")
        await self.fill("Legal name of the company", p.company_name)
        await self.fill("Incorporation number", p.incorporation_number)
        if not await self.select("Province of incorporation", p.province):
            raise BusinessError(f"{PORTAL}: province {p.province!r} is not a Canadian "
                                "province or territory the CRTC accepts")
        for service in p.services:
            await page.get_by_label(SERVICE_LABELS[service], exact=True).check()
        await self.fill("Contact name", p.contact.name)
        await self.fill("Contact email", p.contact.email)
        await self.fill("Contact phone", p.contact.phone)
        await self.fill("Your file reference", sub.reference)
        await self.shot("cover-page")
        await self.submit("Continue", "the Telecom Cover Page")

        await self.expect_step("Attach Documents")
        await page.get_by_label("Registration letter (PDF or text)").set_input_files(
            {"name": LETTER, "mimeType": "application/pdf", "buffer": pdf})
        await self.shot("documents")
        # an admin's approval first, where it is asked for: of exactly this page and letter
        letter = hashlib.sha256(pdf).hexdigest()
        await self.ctx.approve(f"{await page_text(page)}\nletter sha256 {letter}",
                               evidence=lambda: self.shot("review-for-approval"))
        await self.ctx.step("submit")
        async with sub:
            await self.submit_final("Submit Registration", "the registration",
                                    "#confirmation-number")
            await self.shot("confirmation")
            link = page.locator("#confirmation-letter")
            when = page.locator("#received")
            found = {"confirmation": await self.text("#confirmation-number",
                                                     "the confirmation", CONFIRMATION),
                     "letter": await link.get_attribute("href") if await link.count()
                     else None,
                     "received": (await when.inner_text()).strip()
                     if await when.count() else None}
            await sub.confirmed(None, confirmation=found["confirmation"],
                                **({"received": found["received"]} if found["received"]
                                   else {}))
        return found

    async def listed(self, company: str) -> str | None:
        """The date the public registration list shows ``company`` since; None: not yet.
        Read-only, and public (no sign-in needed)."""
        await self.goto(f"{self.base}/registration-list", "the registration list")
        if not await self.page.locator("table#registration-list").count():
            raise RetryableError(f"{PORTAL}: no registration list table — portal changed?")
        await self.shot("registration-list")
        rows = await self.page.locator("#registration-list tr.provider").evaluate_all(
            "rows => rows.map(r => [r.querySelector('.name').innerText, "
            "r.querySelector('.listed').innerText])")
        want = " ".join(company.split()).casefold()
        return next((str(on).strip() for name, on in rows
                     if " ".join(str(name).split()).casefold() == want), None)

    async def finish(self, found: dict[str, Any], reconciled: bool) -> dict[str, Any]:
        number = found["confirmation"]
        await self.ctx.step("confirmation letter")
        if not found.get("letter"):
            raise RetryableError(f"{PORTAL}: no confirmation letter link for {number}")
        data = await self.pdf(found["letter"], "the confirmation letter")
        name = f"{number}-confirmation-letter.pdf"
        await self.ctx.store_document(name, "application/pdf", data)
        return {"confirmation": number, "documents": [name], "reconciled": reconciled}


async def process_crtc(ctx: FlowContext[ProcessCrtcPayload]) -> dict[str, Any]:
    async with browser_page(ctx) as (page, evidence):
        crtc = CrtcPortal(ctx, page, evidence)
        await sign_in_with_account(ctx, page)   # a GCKey, when an account is configured
        for again in (False, True):
            try:
                return await _register_once(ctx, crtc)
            except SessionLost as lost:
                # the portal ended the session mid-flow: sign in again and go on from the
                # checkpoints (a submission in doubt is looked up, never filed twice)
                if again:
                    raise
                log.info("job %s: %s mid-flow; signing in again", ctx.job_id, lost)
                await ctx.step("signing in again")
                await sign_in_with_account(ctx, page)
    raise AssertionError("unreachable")


async def _register_once(ctx: FlowContext[ProcessCrtcPayload], crtc: CrtcPortal
                         ) -> dict[str, Any]:
    sub = ctx.submission(KIND)
    if sub.confirmation is not None and sub.confirmation.get("letter_document"):
        return await _listed(ctx, crtc, sub)   # the letter is stored: only the list is left
    if sub.confirmation is not None or sub.in_doubt:
        # a lost answer, or a receipt awaiting staff: the search (read-only) decides
        await ctx.step("looking the submission up")
        found = await crtc.find(sub.reference)
        if found:
            if sub.in_doubt:
                await sub.confirmed(confirmation=found["confirmation"])
            await waiting.decided(ctx, sub)
            return await _lettered(ctx, crtc, sub, await crtc.finish(found, reconciled=True))
        if sub.confirmation is not None:
            await waiting.undecided(ctx, sub, _awaiting(sub.confirmation))
        await waiting.not_found_after_lost_answer(ctx, sub)   # returns only if vouched
    await ctx.step("cover page")
    found = await crtc.register(ctx.args, sub)
    if not found.get("letter"):   # a dated receipt: staff process it later
        await waiting.undecided(ctx, sub, _awaiting(found))
    await waiting.decided(ctx, sub)   # the letter at once
    return await _lettered(ctx, crtc, sub, await crtc.finish(found, reconciled=False))


async def _lettered(ctx: FlowContext[ProcessCrtcPayload], crtc: CrtcPortal, sub: Submission,
                    result: dict[str, Any]) -> dict[str, Any]:
    """The confirmation letter is stored: say so in the submission, then the list."""
    await sub.confirmed(None, **{**(sub.confirmation or {}),
                                 "letter_document": result["documents"][0],
                                 "letter_seen": clock.now().isoformat(),
                                 "reconciled": result["reconciled"]})
    return await _listed(ctx, crtc, sub)


async def _listed(ctx: FlowContext[ProcessCrtcPayload], crtc: CrtcPortal,
                  sub: Submission) -> dict[str, Any]:
    conf = dict(sub.confirmation or {})
    company = ctx.args.company_name
    await ctx.step("the public registration list")
    on = await crtc.listed(company)
    if on is None:
        seen = datetime.fromisoformat(str(conf["letter_seen"]))
        await waiting.undecided_since(
            ctx, LISTING, seen, f"the public registration list to show {company} (letter "
            f"{conf['confirmation']} of {seen:%Y-%m-%d %H:%M} UTC)")
    await waiting.decided(ctx, sub, stage=LISTING,
                          since=datetime.fromisoformat(str(conf["letter_seen"])))
    return {"confirmation": conf["confirmation"], "documents": [conf["letter_document"]],
            "reconciled": bool(conf.get("reconciled")), "listed_on": on}


def _awaiting(receipt: Mapping[str, Any]) -> str:
    received = f" received {receipt['received']}" if receipt.get("received") else ""
    return f"CRTC staff to process {receipt['confirmation']}{received}"
