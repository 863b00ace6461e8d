"""CRTC flow: register the company as a telecommunications service provider.

Telecom Cover Page → Attach Documents (the registration letter, sent as a text file made
from ``letter_text``) → confirmation number and confirmation letter PDF.

Submission ``crtc_registration`` (jobs/submission.py), its reference the portal's "Your file
reference", confirmed with ``confirmation="CRTC-2026-000123"``.

A retry of a confirmed or in-doubt submission first searches the portal's submissions by
that reference: found → that submission is the result (its letter is fetched again); not
found → it is submitted again (in doubt) or tried later (confirmed, not listed yet).
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

from portalq.jobs.errors import BusinessError, RetryableError
from portalq.jobs.submission import Submission
from portalq.portals.flows.base import browser_page, page_text
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.pages import PortalPage
from portalq.portals.flows.signin import SessionLost, sign_in_with_account

if TYPE_CHECKING:
    from playwright.async_api import Page

log = logging.getLogger("portalq.flows")

PORTAL = "crtc"
KIND = "crtc_registration"
SERVICE_LABELS = {"reseller": "Reseller of telecommunications services",
                  "voip": "Local VoIP services", "long_distance": "Long distance services",
                  "internet": "Internet services"}
CONFIRMATION = r"CRTC-\d{4}-\d{6}"


class CrtcPortal(PortalPage):
    def __init__(self, ctx: FlowContext, page: Page, evidence: Any) -> None:
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

    async def register(self, p: Any, sub: Submission) -> dict[str, Any]:
        page = self.page
        await self.goto(f"{self.base}/register", "the registration")
        await self.expect_step("Telecom Cover Page")
        await self.fill("Legal name of the company", p["company_name"])
        await self.fill("Incorporation number", p.get("incorporation_number"))
        if not await self.select("Province of incorporation", p["province"]):
            raise BusinessError(f"{PORTAL}: province {p['province']!r} is not a Canadian "
                                "province or territory the CRTC accepts")
        for service in p.get("services", ["reseller"]):
            await page.get_by_label(SERVICE_LABELS[service], exact=True).check()
        contact = p["contact"]
        await self.fill("Contact name", contact["name"])
        await self.fill("Contact email", contact["email"])
        await self.fill("Contact phone", contact["phone"])
        await self.fill("Your file reference", sub.reference)
        await self.shot("cover-page")
        await self.submit("Continue", "the Telecom Cover Page")

        await self.expect_step("Attach Documents")
        await page.get_by_label("Registration letter (PDF or text)").set_input_files(
            {"name": "registration-letter.txt", "mimeType": "text/plain",
             "buffer": p["letter_text"].encode("utf-8")})
        await self.shot("documents")
        # an admin's approval first, where it is asked for: of exactly this page and letter
        letter = hashlib.sha256(p["letter_text"].encode("utf-8")).hexdigest()
        await self.ctx.approve(f"{await page_text(page)}\nletter sha256 {letter}",
                               evidence=lambda: self.shot("review-for-approval"))
        await self.ctx.step("submit")
        async with sub:
            await self.submit_final("Submit Registration", "the registration",
                                    "#confirmation-number")
            await self.shot("confirmation")
            found = {"confirmation": await self.text("#confirmation-number",
                                                     "the confirmation", CONFIRMATION),
                     "letter": await page.locator("#confirmation-letter").get_attribute("href")}
            await sub.confirmed(confirmation=found["confirmation"])
        return found

    async def finish(self, found: dict[str, Any], reconciled: bool) -> dict[str, Any]:
        number = found["confirmation"]
        await self.ctx.step("confirmation letter")
        if not found.get("letter"):
            raise RetryableError(f"{PORTAL}: no confirmation letter link for {number}")
        data = await self.pdf(found["letter"], "the confirmation letter")
        name = f"{number}-confirmation-letter.pdf"
        await self.ctx.store_document(name, "application/pdf", data)
        return {"confirmation": number, "documents": [name], "reconciled": reconciled}


async def process_crtc(ctx: FlowContext) -> dict[str, Any]:
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


async def _register_once(ctx: FlowContext, crtc: CrtcPortal) -> dict[str, Any]:
    sub = ctx.submission(KIND)
    if sub.confirmation is not None or sub.in_doubt:
        await ctx.step("looking the submission up")
        found = await crtc.find(sub.reference)
        if found:
            if sub.in_doubt:
                await sub.confirmed(confirmation=found["confirmation"])
            return await crtc.finish(found, reconciled=True)
        if sub.confirmation is not None:
            raise RetryableError(f"{PORTAL}: submission {sub.confirmation['confirmation']} "
                                 "not found by its reference yet")
    await ctx.step("cover page")
    return await crtc.finish(await crtc.register(ctx.payload, sub), reconciled=False)
