"""The BC Registries web site as the flows see it (portals/bc/flow.py): the Name Request
and incorporation pages, their words and fees, File and Pay's two ways out (PayBC or the
temporary registration's dashboard), and the look-ups of a filing by its reference.

Page objects only: what to do and when (which submission, a retry, waiting on the
registry's decision) is the flow's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from portalq.jobs.errors import BusinessError, PortalChanged, RetryableError
from portalq.jobs.submission import Submission
from portalq.portals.bc.payload import Applicant
from portalq.portals.entity.payload import FileEntityPayload
from portalq.portals.flows import wait_on_portal as waiting
from portalq.portals.flows.base import Evidence
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.pages import PortalPage
from portalq.portals.payloads import Person

if TYPE_CHECKING:
    from playwright.async_api import Page

PORTAL = "bc_corporate_online"
NAME_REQUEST, INCORPORATION = "name_request", "incorporation"
FEES = {"BC": "$350.00", "ULC": "$1,000.00"}
#: a temporary registration's identifier: "T" and 9 letters or digits, at least one a digit
#: (bcgov/lear legal-api/src/legal_api/services/bootstrap.py, _generate_temp_identifier)
TEMPORARY_NUMBER = r"T(?=[A-Za-z]*\d)[A-Za-z0-9]{9}"
STEPS = ("Define Your Company", "Add People and Roles", "Create Share Structure",
         "Incorporation Agreement", "Review and Confirm")
ROLE_LABELS = {"completing_party": "Completing Party", "incorporator": "Incorporator",
               "director": "Director"}
#: the agreement choices are record-book statements (bcgov business-create-ui)
AGREEMENT_LABELS = {
    "sample": "The sample Incorporation Agreement and Table 1 Articles has been completed and "
              "a copy has been added to the company's record book.",
    "custom": "The custom Incorporation Agreement and custom Articles has been completed and a "
              "copy has been added to the company's record book."}
#: the review page's Completing Party Statement (text): certifying it is certifying these
COMPLETING_PARTY_STATEMENT = (
    "An original signature has been placed on each of those signature lines,",
    "I have no reason to believe that the signature placed on a signature line is not the "
    "signature of the person whose name is set out under that signature line, and",
    "I have relevant knowledge of the company and that I am authorized to make this filing.")


def _norm(name: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", name.casefold()).split())


def _people(p: FileEntityPayload) -> list[tuple[Person, list[str]]]:
    """Each person once, with all their roles (the same person may hold several)."""
    out: dict[tuple[str, ...], tuple[Person, list[str]]] = {}
    groups = (("completing_party", [p.completing_party]),
              ("incorporator", p.incorporators), ("director", p.directors))
    for role, people in groups:
        for person in people:
            key = tuple((n or "").strip().lower()
                        for n in (person.first_name, person.middle_name, person.last_name))
            entry = out.setdefault(key, (person, []))
            if role not in entry[1]:
                entry[1].append(role)
    return list(out.values())


class BcPortal(PortalPage):
    def __init__(self, ctx: FlowContext[BaseModel], page: Page, evidence: Evidence) -> None:
        super().__init__(ctx, page, evidence, PORTAL)
        self.base = ctx.portal_urls[PORTAL].rstrip("/")

    # ---- Name Request ---------------------------------------------------------------------
    async def name_request(self, names: Iterable[str], entity: str,
                           applicant: Applicant) -> dict[str, Any]:
        cp, contact = self.ctx.checkpoints, applicant.email
        sub = self.ctx.submission(NAME_REQUEST)
        if cp.get("nr_number"):  # obtained earlier: never a second NR, re-read its state
            found = await self.find_nr(contact, nr=str(cp["nr_number"]))
            if found:
                return await self._nr_confirmed(sub, found)
            return {k: cp.get(k) for k in ("nr_number", "nr_state", "nr_name", "nr_expires_on")}
        if sub.in_doubt:
            await self.ctx.step("looking the name request up")
            found = await self.find_nr(contact, reference=sub.reference)
            if found:
                return await self._nr_confirmed(sub, found)
            await waiting.not_found_after_lost_answer(self.ctx, sub)   # returns if vouched
        # the names this NR is for, before it exists: a retry with other names knows it
        # needs a new one (portals/bc/name_requests.py)
        await self.ctx.save_checkpoint(nr_for_names=list(names))
        await self.ctx.step("name request")
        await self.goto(f"{self.base}/nr", "the Name Request")
        if not await self.select("Entity type", entity):
            raise PortalChanged(f"{PORTAL}: entity type {entity} not offered — portal changed?",
                                where="entity type", expected=f"an option {entity!r}")
        for i, name in enumerate(names, start=1):
            await self.fill(f"Name choice {i}", name)
        await self.shot("nr-names")
        await self.submit("Continue", "the Name Request names")
        await self.fill("Applicant name", applicant.name)
        await self.fill("Phone", applicant.phone)
        await self.fill("Email", applicant.email)
        await self.fill("Your reference (optional)", sub.reference)
        await self.text("#fee", "the Name Request payment", r"Fee: \$30\.00")
        await self.shot("nr-applicant")
        await self.ctx.step("submit")
        async with sub:
            await self.submit_final("Submit and Pay", "the Name Request", "#nr-number")
            await self.shot("nr-result")
            return await self._nr_confirmed(sub, await self._read_nr("the Name Request result"))

    async def _nr_confirmed(self, sub: Submission, nr: dict[str, Any]) -> dict[str, Any]:
        await sub.confirmed(also=nr, **nr)
        return nr

    async def _read_nr(self, where: str) -> dict[str, Any]:
        nr: dict[str, str | None] = {
            "nr_number": await self.text("#nr-number", where, r"NR \d{7}"),
            "nr_state": await self.text("#nr-state", where, r"[A-Z][A-Z_-]*")}
        for key, selector in (("nr_name", "#nr-name"), ("nr_expires_on", "#nr-expires")):
            nr[key] = (await self.page.locator(selector).inner_text()).strip() or None
        # the examiners' decision per name, in their words: (name, decision, reason)
        rows = self.page.locator("table tr:has(td)")
        decisions = []
        for i in range(await rows.count()):
            cells = [c.strip() for c in await rows.nth(i).locator("td").all_inner_texts()]
            if len(cells) == 3:
                decisions.append(cells)
        out: dict[str, Any] = dict(nr)
        out["nr_decisions"] = decisions
        return out

    async def find_nr(self, contact: str, *, nr: str = "",
                      reference: str = "") -> dict[str, Any] | None:
        """The Name Request by its number (or the client reference) and applicant contact."""
        await self.goto(f"{self.base}/nr/status", "the Name Request search")
        await self.fill("NR number", nr)
        await self.fill("or your reference", reference)
        await self.fill("Applicant phone or email", contact)
        await self.submit("Search", "the Name Request search")
        await self.shot("nr-lookup")
        if await self.page.locator("#no-results").count():
            return None
        return await self._read_nr("the Name Request search")

    # ---- Incorporation --------------------------------------------------------------------
    async def find_filing(self, reference: str) -> dict[str, Any] | None:
        await self.goto(f"{self.base}/filings", "the filing search")
        await self.fill("Folio or Reference Number", reference)
        await self.submit("Search", "the filing search")
        await self.shot("filing-lookup")
        row = self.page.locator("tr.filing").first
        if not await self.page.locator("tr.filing").count():
            return None   # not completed by the registry yet, or never received
        return {"incorporation_number": (await row.locator(".number").inner_text()).strip(),
                "legal_name": (await row.locator(".name").inner_text()).strip(),
                "certificate": await row.locator("a.certificate").get_attribute("href")}

    async def draft_status(self, temp: str) -> str:
        """The status of temporary registration ``temp`` on its business dashboard (the
        registry's own record: DRAFT = saved, not paid)."""
        await self.goto(f"{self.base}/dashboard/{temp}", "the business dashboard")
        await self.shot("dashboard")
        return await self.text("#filing-status", "the business dashboard", r"[A-Z_]+")

    async def pay_draft(self, temp: str) -> str:
        """Retry the payment of the saved draft ``temp`` (never File and Pay again); the
        status after it (still DRAFT when PayBC failed again)."""
        await self.ctx.step(f"paying the saved draft {temp}")
        await self.submit_final("Retry Payment", "the draft's payment", "#filing-status")
        await self.shot("draft-payment")
        return await self.text("#filing-status", "the business dashboard", r"[A-Z_]+")

    async def step(self, n: int) -> None:
        await self.ctx.step(STEPS[n - 1])
        await self.expect_step(STEPS[n - 1])

    async def incorporate(self, p: FileEntityPayload, entity: str, nr_number: str,
                          consent: bool, sub: Submission) -> dict[str, Any]:
        page = self.page
        await self.goto(f"{self.base}/inc", "the incorporation start page")
        await self.shot("inc-start")
        await self.submit("Start Incorporation Application", "the incorporation start page")
        await self.step(1)
        if not await self.select("Type of business", entity):
            raise PortalChanged(f"{PORTAL}: entity type {entity} not offered — portal changed?",
                                where="entity type", expected=f"an option {entity!r}")
        if nr_number:
            await page.get_by_label("Use an approved Name Request", exact=True).check()
            await self.fill("Name Request number", nr_number)
            if consent:
                await page.get_by_label("The consent letter for this conditional name has "
                                        "been received", exact=True).check()
        else:
            await page.get_by_label("Numbered company", exact=True).check()
        office = p.registered_office
        for label, value in (("Street", office.street), ("City", office.city),
                             ("Province", office.region), ("Postal code", office.postal_code)):
            await self.fill(label, value)
        await self.fill("Email", p.contact_email)
        await self.fill("Phone", p.contact_phone)
        await self.shot("step1")
        await self.submit("Continue", STEPS[0])

        await self.step(2)
        for person, roles in _people(p):
            for label, name in (("First name", person.first_name),
                                ("Middle name", person.middle_name),
                                ("Last name", person.last_name)):
                await self.fill(label, name)
            for role in roles:
                await page.get_by_label(ROLE_LABELS[role], exact=True).check()
            await self.submit("Add Person", STEPS[1])
        await self.shot("step2")
        await self.submit("Continue", STEPS[1])

        await self.step(3)
        for share in p.share_classes:
            await self.fill("Class name", share.name)
            await self.fill("Maximum number of shares (blank: no maximum)", share.max_shares)
            await self.submit("Add Share Class", STEPS[2])
        await self.shot("step3")
        await self.submit("Continue", STEPS[2])

        await self.step(4)
        await page.get_by_label(AGREEMENT_LABELS[p.agreement], exact=True).check()
        await self.shot("step4")
        await self.submit("Continue", STEPS[3])

        await self.step(5)
        shown = await self.text("#review-name", STEPS[4])
        if nr_number and p.legal_name and _norm(shown) != _norm(p.legal_name):
            raise BusinessError(f"{nr_number} reserves {shown!r}, not the ordered name "
                                f"{p.legal_name!r}; not filed")
        fee = await self.text("#fee", STEPS[4])
        if fee != f"Fee: {FEES[entity]}":
            raise BusinessError(f"{PORTAL}: unexpected fee on review ({fee!r}, expected "
                                f"{FEES[entity]}); not filed")
        await self.fill("Folio or Reference Number", sub.reference)
        # one Certify section, certifying the Completing Party Statement shown above it:
        # only when the statement is the one the flow knows
        shown_text = " ".join((await page.locator("body").inner_text()).split())
        boxes = page.locator("#certify-section").get_by_role("checkbox")
        if await boxes.count() != 1 or not all(
                t in shown_text for t in COMPLETING_PARTY_STATEMENT):
            raise PortalChanged(f"{PORTAL}: the Completing Party Statement or its one Certify "
                                "section is not the expected one — portal changed?",
                                where="certify", expected="the Completing Party Statement "
                                "and one Certify section")
        await boxes.first.check()
        await self.shot("review")
        await self.ctx.step("submit")
        async with sub:
            await self.submit_final("File and Pay", "the incorporation filing",
                                    "#incorporation-number, #temporary-number")
            await self.shot("filed")
            if await page.locator("#temporary-number").count():
                # saved (and paid, unless PayBC failed): the temporary registration; the
                # registry completes it
                temp: dict[str, Any] = {"temporary_number": await self.text(
                    "#temporary-number", "the business dashboard", TEMPORARY_NUMBER),
                    "legal_name": await self.text("#legal-name", "the business dashboard")}
                if await page.locator("#payment-error").count():
                    temp["draft"] = True   # saved, not paid: pay this draft, never refile
                await sub.confirmed(None, **temp)
                return temp
            where = "the incorporation confirmation"
            filing = {"incorporation_number": await self.text("#incorporation-number", where,
                                                              r"BC\d{7}"),
                      "legal_name": await self.text("#legal-name", where),
                      "certificate": await page.locator("#certificate").get_attribute("href")}
            await sub.confirmed(incorporation_number=filing["incorporation_number"],
                                legal_name=filing["legal_name"])
        return filing

    async def finish(self, sub: Submission, filing: dict[str, Any], nr_number: str | None,
                     reconciled: bool) -> dict[str, Any]:
        number = filing["incorporation_number"]
        if (sub.confirmation or {}).get("incorporation_number") != number:
            # found by the lookup (after an attempt in doubt, or once the registry
            # completed a temporary registration)
            await sub.confirmed(None, **{**(sub.confirmation or {}),
                                         "incorporation_number": number,
                                         "legal_name": filing["legal_name"]})
        await waiting.decided(self.ctx, sub)
        await self.ctx.step("certificate")
        if not filing.get("certificate"):
            raise RetryableError(f"{PORTAL}: no certificate link for {number}")
        data = await self.pdf(filing["certificate"], "the certificate of incorporation")
        name = f"{number}-certificate-of-incorporation.pdf"
        await self.ctx.store_document(name, "application/pdf", data)
        return {"incorporation_number": number, "legal_name": filing["legal_name"],
                "nr_number": nr_number, "documents": [name], "reconciled": reconciled}
