"""``file_entity`` for Delaware: a certificate of formation (LLC) or incorporation.

Submission ``formation`` (jobs/submission.py), its reference stable for the job
(``PQ-<job id>``: the portal's status lookup finds a filing by it), confirmed with
``file_number`` (7 digits) and ``certificate_url``. Other checkpoints: ``reconciled``
("found" / "not_found": what the lookup said after an uncertain submit), ``documents``.

A retry of a submission in doubt looks the filing up by its reference: found -> completed
without filing again; not found -> nothing was filed, submit again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from portalq.jobs.errors import BusinessError
from portalq.portals.flows.base import (
    Evidence,
    browser_page,
    download,
    fetch_document,
    has_document,
)
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.pages import Signals, WordedPage, absolute_url
from portalq.portals.flows.signin import sign_in_with_account
from portalq.portals.payloads import FileEntityPayload, Person

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page

PORTAL = "delaware_icis"
SUBMISSION = "formation"
DOC_TYPES = {"LLC": "LLC", "CORPORATION": "CORPORATION"}
FILE_NUMBER_RE = r"\d{7}"
INELIGIBLE = "Not eligible for online filing"


def _name(person: Person) -> str:
    return " ".join(filter(None, [person.first_name, person.middle_name, person.last_name]))


class DelawareFiling(WordedPage):
    """Page object of the Division of Corporations online filing: the toolkit's worded
    page; its steps are its headings, and "not eligible for online filing" is a refusal."""

    step_from = "heading"
    expired_phrases = (("Session timed out", "session timed out"),)

    def __init__(self, ctx: FlowContext, page: Page, evidence: Evidence) -> None:
        super().__init__(ctx, page, evidence, PORTAL, name="Delaware")
        self.base = ctx.portal_urls[PORTAL].rstrip("/")
        self.certificate_link: Locator | None = None  # set by submit() / lookup()

    def read(self, raw: dict[str, Any]) -> Signals:
        s = super().read(raw)
        if INELIGIBLE in s.text:
            return replace(s, error="ineligible", refused=raw["errorText"] or "")
        return s

    def system_error(self, s: Signals, where: str) -> Exception:
        if s.error == "ineligible":
            return BusinessError(f"Delaware: not eligible for online filing: {s.refused}")
        return super().system_error(s, where)

    async def next(self, heading: str, shot: str, name: str = "Continue") -> None:
        await self.shot(shot)
        await self.expect_step(heading, await self.click(name, shot))

    async def start(self) -> None:
        await self.goto(f"{self.base}/", "the home page")
        await self.expect_step("Online Filing")
        await self.next("Step 1 of 3: Entity Information", "home", "Start a New Filing")

    async def entity(self, p: FileEntityPayload, client_ref: str) -> None:
        if p.entity_type not in DOC_TYPES:
            raise BusinessError(f"entity type {p.entity_type} cannot be filed in Delaware")
        if not p.legal_name:
            raise BusinessError("a Delaware filing needs the entity's legal name")
        await self.page.get_by_label("Document type", exact=True).select_option(
            DOC_TYPES[p.entity_type])
        await self.fill("Entity name", p.legal_name)
        await self.fill("Client reference", client_ref, exact=False)   # "(your own, ...)"
        await self.next("Step 2 of 3: Registered Agent and Details", "entity")

    async def details(self, p: FileEntityPayload) -> None:
        office = p.registered_office
        signer = p.incorporators[0] if p.entity_type == "CORPORATION" and p.incorporators \
            else p.completing_party
        await self.fill("Registered agent name", p.registered_agent)
        await self.fill("Registered office street", office.street)
        await self.fill("City", office.city)
        await self.fill("State", office.region)
        await self.fill("ZIP code", office.postal_code)
        await self.fill("Authorized person / incorporator", _name(signer))
        if p.entity_type == "CORPORATION":
            await self.fill("Classes of stock", "\n".join(
                f"{c.name}: {c.max_shares or ''}".strip(" :") for c in p.share_classes),
                exact=False)   # "Classes of stock, one per line: ..."
        await self.next("Step 3 of 3: Review and Submit", "details")

    async def submit_control(self) -> None:
        """The review page, and its submit button there (before the point of no return)."""
        await self.shot("review")
        await self.control("Submit Filing", "the review")

    async def file(self) -> tuple[str, str]:
        """(file number, certificate URL); an answer lost or not recognised is retryable:
        the retry reconciles by the client reference."""
        await self.submit_final("Submit Filing", "the filing", "#file-number")
        await self.expect_step("Filing Accepted")
        number = await self.text("#file-number", "the filing", FILE_NUMBER_RE)
        self.certificate_link = self.page.locator("#certificate")
        return number, await self._certificate_url()

    async def lookup(self, client_ref: str) -> tuple[str, str] | None:
        """The filing made under ``client_ref``: (file number, certificate URL), or None."""
        await self.goto(f"{self.base}/lookup", "the status lookup")
        await self.expect_step("Filing Status Lookup")
        await self.fill("Client reference", client_ref)
        await self.submit("Search", "the status lookup")
        await self.expect_step("Filing Status Lookup")
        await self.page.locator("#results, #no-results").first.wait_for()
        await self.shot("lookup")
        rows = self.page.locator("#results tr:has(td.file-number)")
        if await rows.count() == 0:
            return None
        number = (await rows.first.locator("td.file-number").inner_text()).strip()
        self.certificate_link = rows.first.locator("a.certificate")
        return number, await self._certificate_url()

    async def _certificate_url(self) -> str:
        assert self.certificate_link is not None
        return absolute_url(self.base, await self.certificate_link.get_attribute("href") or "")


async def file_entity_de(ctx: FlowContext) -> dict[str, Any]:
    p = FileEntityPayload.model_validate(dict(ctx.payload))
    sub = ctx.submission(SUBMISSION, reference=f"PQ-{ctx.job_id}")
    if sub.confirmation is not None:
        return await _certificate_only(ctx, sub.confirmation)
    async with browser_page(ctx) as (page, evidence):
        de = DelawareFiling(ctx, page, evidence)
        await sign_in_with_account(ctx, page)   # the registered agent's, when configured
        found = None
        if sub.in_doubt:
            await ctx.step("looking the filing up")
            found = await de.lookup(sub.reference)
            await ctx.save_checkpoint(reconciled="found" if found else "not_found")
            if found:
                await sub.confirmed(file_number=found[0], certificate_url=found[1])
        if found is None:
            await ctx.step("entity")
            await de.start()
            await de.entity(p, sub.reference)
            await de.details(p)
            await ctx.step("submit")
            await de.submit_control()
            async with sub:
                found = await de.file()
                await sub.confirmed(file_number=found[0], certificate_url=found[1])
        number, cert_url = found
        await ctx.step("certificate")
        await evidence.shot(page, "filed")
        name, pdf = await download(page, de.certificate_link, ctx.artifacts_dir)
    await ctx.store_document(name, "application/pdf", pdf)
    await ctx.save_checkpoint(documents=[name])
    return {"file_number": number, "entity_name": p.legal_name, "documents": [name]}


async def _certificate_only(ctx: FlowContext, cp: Any) -> dict[str, Any]:
    """Filed by an earlier attempt: never the portal's form again, only the certificate."""
    url = cp.get("certificate_url", "")
    name = url.rsplit("/", 1)[-1] if url else ""
    if name and not await has_document(ctx, name):
        name, pdf = await fetch_document(ctx, url)
        await ctx.store_document(name, "application/pdf", pdf)
        await ctx.save_checkpoint(documents=[name])
    return {"file_number": cp["file_number"], "documents": [name] if name else []}
