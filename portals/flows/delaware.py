"""``file_entity`` for Delaware: a certificate of formation (LLC) or incorporation.

Submission ``formation`` (jobs/submission.py), its reference stable for the job
(``PQ-<job id>``: the portal's status lookup finds a filing by it), confirmed with
``file_number`` (7 digits) and ``certificate_url``. Other checkpoints: ``reconciled``
("found" / "not_found": what the lookup said after an uncertain submit), ``documents``.

A retry of a submission in doubt looks the filing up by its reference: found -> completed
without filing again; not found -> nothing was filed, submit again.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from jobs.errors import BusinessError, PortalClosed, PortalUnavailable, RetryableError
from portals.flows.base import (
    ConnectionLost,
    Evidence,
    browser_page,
    click_and_wait,
    control,
    download,
    fetch_document,
    has_document,
    page_text,
)
from portals.flows.context import FlowContext
from portals.flows.pages import absolute_url
from portals.flows.signin import sign_in_with_account
from portals.payloads import FileEntityPayload, Person

if TYPE_CHECKING:
    from playwright.async_api import Page

PORTAL = "delaware_icis"
SUBMISSION = "formation"
DOC_TYPES = {"LLC": "LLC", "CORPORATION": "CORPORATION"}
FILE_NUMBER_RE = re.compile(r"^\d{7}$")


def _name(person: Person) -> str:
    return " ".join(filter(None, [person.first_name, person.middle_name, person.last_name]))


class DelawareFiling:
    """Page object of the Division of Corporations online filing."""

    def __init__(self, page: Page, base_url: str, evidence: Evidence) -> None:
        self.page, self.base, self.evidence = page, base_url.rstrip("/"), evidence
        self.certificate_link: Any = None  # set by submit() / lookup()

    async def classify(self, status: int | None) -> None:
        text = await page_text(self.page)
        if "not available at this time" in text:
            raise PortalClosed("Delaware online filing: not available at this time")
        if "Scheduled maintenance" in text:
            raise PortalClosed("Delaware online filing: scheduled maintenance", outage=True)
        if "Not eligible for online filing" in text:
            detail = await self.page.locator(".error").first.inner_text()
            raise BusinessError(f"Delaware: not eligible for online filing: {detail}")
        if "Session timed out" in text:
            raise RetryableError("Delaware session timed out before submission")
        if status is not None and status >= 500:
            raise PortalUnavailable(f"Delaware online filing answered HTTP {status}: {text[-160:]}")

    async def expect(self, heading: str, status: int | None = None) -> None:
        """Confirm the page by its heading; otherwise raise what the page means."""
        h1 = self.page.locator("h1")
        shown = (await h1.first.inner_text()).strip() if await h1.count() else ""
        if shown == heading:
            return
        await self.classify(status)
        alert = self.page.get_by_role("alert")
        if await alert.count():
            raise BusinessError(f"Delaware rejected {shown!r}: {await alert.first.inner_text()}")
        raise RetryableError(f"Delaware shows {shown!r}, expected {heading!r}")

    async def next(self, heading: str, shot: str, name: str = "Continue") -> None:
        await self.evidence.shot(self.page, shot)
        button = await control(self.page, name)
        await self.expect(heading, await click_and_wait(self.page, button))

    async def start(self) -> None:
        response = await self.page.goto(f"{self.base}/")
        await self.expect("Online Filing", response.status if response else None)
        await self.next("Step 1 of 3: Entity Information", "home", "Start a New Filing")

    async def entity(self, p: FileEntityPayload, client_ref: str) -> None:
        if p.entity_type not in DOC_TYPES:
            raise BusinessError(f"entity type {p.entity_type} cannot be filed in Delaware")
        if not p.legal_name:
            raise BusinessError("a Delaware filing needs the entity's legal name")
        await self.page.get_by_label("Document type").select_option(DOC_TYPES[p.entity_type])
        await self.page.get_by_label("Entity name").fill(p.legal_name)
        await self.page.get_by_label("Client reference").fill(client_ref)
        await self.next("Step 2 of 3: Registered Agent and Details", "entity")

    async def details(self, p: FileEntityPayload) -> None:
        page, office = self.page, p.registered_office
        signer = p.incorporators[0] if p.entity_type == "CORPORATION" and p.incorporators \
            else p.completing_party
        await page.get_by_label("Registered agent name").fill(p.registered_agent or "")
        await page.get_by_label("Registered office street").fill(office.street)
        await page.get_by_label("City").fill(office.city)
        await page.get_by_label("State", exact=True).fill(office.region)
        await page.get_by_label("ZIP code").fill(office.postal_code)
        await page.get_by_label("Authorized person / incorporator").fill(_name(signer))
        if p.entity_type == "CORPORATION":
            await page.get_by_label("Classes of stock").fill("\n".join(
                f"{c.name}: {c.max_shares or ''}".strip(" :") for c in p.share_classes))
        await self.next("Step 3 of 3: Review and Submit", "details")

    async def submit_control(self) -> Any:
        await self.evidence.shot(self.page, "review")
        return await control(self.page, "Submit Filing")

    async def submit(self, button: Any) -> tuple[str, str]:
        """(file number, certificate URL); anything else is retryable: the retry reconciles."""
        from playwright.async_api import Error as PlaywrightError

        try:
            status = await click_and_wait(self.page, button)
        except (ConnectionLost, PlaywrightError) as exc:
            raise RetryableError(f"Delaware filing submitted, answer lost "
                                 f"({str(exc).splitlines()[0]}); the next attempt reconciles "
                                 f"by client reference") from None
        await self.expect("Filing Accepted", status)
        number = (await self.page.locator("#file-number").inner_text()).strip()
        href = await self.page.locator("#certificate").get_attribute("href") or ""
        if not FILE_NUMBER_RE.match(number):
            raise RetryableError(f"Delaware confirmation without a valid file number ({number!r})")
        self.certificate_link = self.page.locator("#certificate")
        return number, self._absolute(href)

    async def lookup(self, client_ref: str) -> tuple[str, str] | None:
        """The filing made under ``client_ref``: (file number, certificate URL), or None."""
        response = await self.page.goto(f"{self.base}/lookup")
        await self.expect("Filing Status Lookup", response.status if response else None)
        await self.page.get_by_label("Client reference").fill(client_ref)
        status = await click_and_wait(self.page, self.page.get_by_role("button", name="Search"))
        await self.expect("Filing Status Lookup", status)
        await self.page.locator("#results, #no-results").first.wait_for()
        await self.evidence.shot(self.page, "lookup")
        rows = self.page.locator("#results tr:has(td.file-number)")
        if await rows.count() == 0:
            return None
        number = (await rows.first.locator("td.file-number").inner_text()).strip()
        self.certificate_link = rows.first.locator("a.certificate")
        href = await self.certificate_link.get_attribute("href") or ""
        return number, self._absolute(href)

    def _absolute(self, href: str) -> str:
        return absolute_url(self.base, href)


async def file_entity_de(ctx: FlowContext) -> dict[str, Any]:
    p = FileEntityPayload.model_validate(dict(ctx.payload))
    sub = ctx.submission(SUBMISSION, reference=f"PQ-{ctx.job_id}")
    if sub.confirmation is not None:
        return await _certificate_only(ctx, sub.confirmation)
    async with browser_page(ctx, accept_dialogs=True) as (page, evidence):
        await sign_in_with_account(ctx, page)   # the registered agent's, when configured
        de = DelawareFiling(page, ctx.portal_urls[PORTAL], evidence)
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
            button = await de.submit_control()
            async with sub:
                found = await de.submit(button)
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
