"""CRTC flow: register the company as a telecommunications service provider.

Telecom Cover Page → Attach Documents (the registration letter, sent as a text file made
from ``letter_text``) → confirmation number and confirmation letter PDF.

Checkpoints::

    stage="submitting", submission="crtc_registration", crtc_registration_reference=...
    stage="submitted", confirmation="CRTC-2026-000123"

A retry with a confirmation, or with "submitting" and no confirmation, first searches the
portal's submissions by the checkpointed file reference: found → that submission is the
result (its letter is fetched again); not found → it is submitted again.
"""

from __future__ import annotations

from typing import Any

from jobs.errors import BusinessError, RetryableError
from portals.flows.base import browser_page
from portals.flows.bc_crtc_common import PortalPage, client_reference
from portals.flows.context import FlowContext

PORTAL = "crtc"
KIND = "crtc_registration"
SERVICE_LABELS = {"reseller": "Reseller of telecommunications services",
                  "voip": "Local VoIP services", "long_distance": "Long distance services",
                  "internet": "Internet services"}
CONFIRMATION = r"CRTC-\d{4}-\d{6}"


class CrtcPortal(PortalPage):
    def __init__(self, ctx: FlowContext, page: Any, evidence: Any) -> None:
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

    async def register(self, p: Any) -> dict[str, Any]:
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
        reference = client_reference(self.ctx, KIND)
        await self.fill("Your file reference", reference)
        await self.shot("cover-page")
        await self.submit("Continue", "the Telecom Cover Page")

        await self.expect_step("Attach Documents")
        await page.get_by_label("Registration letter (PDF or text)").set_input_files(
            {"name": "registration-letter.txt", "mimeType": "text/plain",
             "buffer": p["letter_text"].encode("utf-8")})
        await self.shot("documents")
        await self.ctx.save_checkpoint(stage="submitting", submission=KIND,
                                       crtc_registration_reference=reference)
        await self.submit_final("Submit Registration", "the registration",
                                "#confirmation-number")
        await self.shot("confirmation")
        return {"confirmation": await self.text("#confirmation-number", "the confirmation",
                                                CONFIRMATION),
                "letter": await page.locator("#confirmation-letter").get_attribute("href")}

    async def finish(self, found: dict[str, Any], reconciled: bool) -> dict[str, Any]:
        number = found["confirmation"]
        await self.ctx.save_checkpoint(stage="submitted", confirmation=number)
        if not found.get("letter"):
            raise RetryableError(f"{PORTAL}: no confirmation letter link for {number}")
        data = await self.pdf(found["letter"], "the confirmation letter")
        name = f"{number}-confirmation-letter.pdf"
        await self.ctx.store_document(name, "application/pdf", data)
        return {"confirmation": number, "documents": [name], "reconciled": reconciled}


async def process_crtc(ctx: FlowContext) -> dict[str, Any]:
    cp = ctx.checkpoints
    async with browser_page(ctx) as (page, evidence):
        crtc = CrtcPortal(ctx, page, evidence)
        if cp.get("confirmation") or (cp.get("stage") == "submitting"
                                      and cp.get("submission") == KIND):
            found = await crtc.find(str(cp[f"{KIND}_reference"]))
            if found:
                return await crtc.finish(found, reconciled=True)
            if cp.get("confirmation"):
                raise RetryableError(f"{PORTAL}: submission {cp['confirmation']} not found by "
                                     "its reference yet")
        return await crtc.finish(await crtc.register(ctx.payload), reconciled=False)
