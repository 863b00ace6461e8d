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
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel

from portalq.jobs import clock
from portalq.jobs.errors import BusinessError, PortalChanged, RetryableError, UncertainOutcome
from portalq.jobs.submission import Submission
from portalq.portals import steps
from portalq.portals.bc.name_requests import classify
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
#: the submissions (points of no return): the NR's creation, its payment, File and Pay,
#: PayBC's payment of the filing
NAME_REQUEST, NR_PAYMENT, INCORPORATION = "name_request", "nr_payment", "incorporation"
PAYBC = "paybc"
#: the paths the flows request, by what they do; the submitting POSTs' paths are
#: SUBMITTING_PATHS (one place, for a guard against a browser's own resend)
PATHS = {"nr_start": "/nr", "nr_applicant": "/nr/applicant", "nr_payment": "/nr/payment",
         "nr_manage": "/nr/status", "inc_start": "/inc", "inc_review": "/inc/step/5",
         "dashboard": "/dashboard/{temp}", "draft_payment": "/dashboard/{temp}/pay",
         "paybc": "/paybc/makepayment/{token}/{back}"}
SUBMITTING_PATHS = {NAME_REQUEST: PATHS["nr_applicant"], NR_PAYMENT: PATHS["nr_payment"],
                    INCORPORATION: PATHS["inc_review"], PAYBC: PATHS["paybc"]}
#: an NR's number: namex's real one, and the temporary one it has until its payment is
#: created (namex api/namex/services/name_request/utils.py, 'NR L' + digits;
#: abstract_nr_resource.py, add_new_nr_number)
NR_NUMBER, TEMPORARY_NR = r"NR \d{7}", r"NR L\d{6}"
#: namex's answer to the same names by the same e-mail within 2 minutes (HTTP 500,
#: api/namex/services/name_request/exceptions.py, NameRequestIsAlreadySubmittedError)
DUPLICATE = "The request with same name is already submitted."
#: namerequest's manage page when nothing matches (app/src/store/actions.ts)
NOT_FOUND = "No records were found that match the information you entered."
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


def _gate_paybc(what: str) -> None:
    """An NR is paid through PayBC at once: never start it with PayBC closed on arrival."""
    steps.gate(PORTAL, "payment", clock.now(), what)


def _not_found(number: str) -> PortalChanged:
    return PortalChanged(f"{PORTAL}: {number} is not found with the applicant's phone and "
                         "e-mail — portal changed?", where="the Name Request search",
                         expected=f"{number} on the manage page")


def _creation_lost(reference: str) -> UncertainOutcome:
    return UncertainOutcome(
        f"{PORTAL}: the answer to the Name Request's creation (reference {reference}) was "
        "lost. namex gives an NR its (temporary) number in that answer and finds an NR only "
        "by its number with the applicant's phone or e-mail, so it cannot be looked up; if it "
        "was created it is unpaid (PENDING_PAYMENT, nothing charged). It is never requested "
        "again automatically: a person checks the applicant's Name Requests, then resolves "
        "the job (--confirmed-filed with the NR, or --not-filed to request it again)")


def _payment_lost(number: str, reference: str) -> UncertainOutcome:
    return UncertainOutcome(
        f"{PORTAL}: the answer to the payment of {number} (reference {reference}) was lost "
        f"and {number} is no longer found: namex gives an NR its real number when its payment "
        "is created, so it was created and may be paid. It is never paid again: a person "
        "finds the NR's real number (the applicant's e-mail from BC Registries, or the "
        "signed-in advanced search by name and applicant) and resolves the job")


class BcPortal(PortalPage):
    def __init__(self, ctx: FlowContext[BaseModel], page: Page, evidence: Evidence) -> None:
        super().__init__(ctx, page, evidence, PORTAL)
        self.base = ctx.portal_urls[PORTAL].rstrip("/")

    # ---- Name Request ---------------------------------------------------------------------
    async def name_request(self, names: Iterable[str], entity: str,
                           applicant: Applicant) -> dict[str, Any]:
        """The job's NR as namex runs it: created PENDING_PAYMENT under a temporary number
        (submission ``name_request``), paid once (``nr_payment``: its real number), then
        read by its number and the applicant's contact until examined. Never a second NR:
        a lost answer is looked up where namex can show it, else a person is asked."""
        cp = self.ctx.checkpoints
        create, pay = self.ctx.submission(NAME_REQUEST), self.ctx.submission(NR_PAYMENT)
        number, fresh = str(cp.get("nr_number") or ""), False
        if not number:
            if create.in_doubt:
                raise _creation_lost(create.reference)
            _gate_paybc("the Name Request")   # never an NR left unpaid by PayBC's hours
            number, fresh = await self._create(list(names), entity, applicant, create), True
        if pay.confirmation is None:
            if not fresh:
                await self.ctx.step("looking the name request up")
                found = await self.find_nr(number, applicant)
                if found is None and pay.in_doubt and re.fullmatch(TEMPORARY_NR, number):
                    raise _payment_lost(number, pay.reference)   # renumbered: paid or paying
                if found is None:
                    raise _not_found(number)
                if found["nr_state"] != "PENDING_PAYMENT":   # paid; its answer was lost
                    await pay.confirmed(also=found, **found)
                    return found
                _gate_paybc(f"the payment of {number}")
                if pay.in_doubt:   # namex vouches: still unpaid under its number
                    await pay.refused(f"namex shows {number} PENDING_PAYMENT: its payment "
                                      "was never created")
            return await self._pay(number, pay)
        found = await self.find_nr(number, applicant)
        if found is None:
            raise _not_found(number)
        await self.ctx.save_checkpoint(**found)
        return found

    async def _create(self, names: list[str], entity: str, applicant: Applicant,
                      sub: Submission) -> str:
        # the names this NR is for, before it exists: a retry with other names knows it
        # needs a new one (portals/bc/name_requests.py)
        await self.ctx.save_checkpoint(nr_for_names=names)
        await self.ctx.step("name request")
        await self.goto(f"{self.base}{PATHS['nr_start']}", "the Name Request")
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
        await self.text("#fee", "the Name Request payment", r"Fee: \$30\.00")
        await self.shot("nr-applicant")
        await self.ctx.step("submit")
        async with sub:
            try:
                await self.submit_final("Submit Name Request", "the Name Request",
                                        "#nr-number")
            except RetryableError:
                if await self.page.get_by_text(DUPLICATE, exact=False).count():
                    # namex refused it: nothing was created
                    await sub.refused("namex: the same names by the same e-mail within 2 min")
                    raise RetryableError(f"{PORTAL}: namex refused the Name Request ("
                                         f"{DUPLICATE!r}): the same names were sent by the "
                                         "same e-mail within 2 minutes; nothing was created, "
                                         "a retry after them may request it") from None
                raise
            await self.shot("nr-created")
            nr = await self._read_nr("the Name Request created")
            if nr["nr_state"] != "PENDING_PAYMENT" or not re.fullmatch(TEMPORARY_NR,
                                                                       nr["nr_number"]):
                raise PortalChanged(f"{PORTAL}: a new Name Request is {nr['nr_state']} "
                                    f"{nr['nr_number']} — portal changed?", where="the NR "
                                    "created", expected=f"PENDING_PAYMENT under {TEMPORARY_NR}")
            await sub.confirmed(also=nr, **nr)
            return str(nr["nr_number"])

    async def _pay(self, number: str, sub: Submission) -> dict[str, Any]:
        """Continue to Payment on the NR's page (created, or found PENDING_PAYMENT): namex
        creates the payment, which gives the NR its real number, and PayBC takes the fee."""
        await self.ctx.step(f"paying {number}")
        async with sub:
            await self.submit_final("Continue to Payment", "the Name Request's payment",
                                    "#nr-number")
            await self.shot("nr-paid")
            nr = await self._read_nr("the Name Request paid")
            if nr["nr_state"] == "PENDING_PAYMENT":
                # PayBC did not take it: the NR keeps its (real) number, unpaid; a retry
                # pays that NR again, never a new one
                await sub.refused("PayBC did not take the payment")
                await self.ctx.save_checkpoint(**nr)
                raise RetryableError(f"{PORTAL}: PayBC did not take the payment of "
                                     f"{nr['nr_number']} (still PENDING_PAYMENT); its payment "
                                     "is retried, never a new Name Request")
            await sub.confirmed(also=nr, **nr)
            return nr

    async def _read_nr(self, where: str) -> dict[str, Any]:
        nr: dict[str, str | None] = {
            "nr_number": await self.text("#nr-number", where, f"{NR_NUMBER}|{TEMPORARY_NR}"),
            "nr_state": await self.text("#nr-state", where, r"[A-Z][A-Z_-]*")}
        classify(str(nr["nr_state"]))   # a state namex does not know: a changed portal
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

    async def find_nr(self, number: str, applicant: Applicant) -> dict[str, Any] | None:
        """The NR on namerequest's manage page: its number with the applicant's phone and
        e-mail (existing-request-search.vue; namex matches either)."""
        await self.goto(f"{self.base}{PATHS['nr_manage']}", "the Name Request search")
        await self.fill("NR Number", number)
        await self.fill("Applicant's Phone Number", applicant.phone)
        await self.fill("Applicant's Notification Email", applicant.email)
        await self.submit("Retrieve Name Request", "the Name Request search")
        await self.shot("nr-lookup")
        if await self.page.get_by_text(NOT_FOUND, exact=False).count():
            return None
        return await self._read_nr("the Name Request search")

    # ---- Incorporation --------------------------------------------------------------------
    async def dashboard(self, temp: str) -> dict[str, Any]:
        """The business dashboard of temporary registration ``temp`` (Actions.vue's return
        URL, BUSINESS_DASH_URL + the identifier): read-only. ``status`` is lear's filing
        status (DRAFT, PENDING, PAID, COMPLETED); ``filed``: a filing is there (an unpaid
        one offers its payment again); COMPLETED carries the BC number and certificate."""
        await self.goto(f"{self.base}{PATHS['dashboard'].format(temp=temp)}",
                        "the business dashboard")
        await self.shot("dashboard")
        return await self._dashboard_seen(temp)

    async def _dashboard_seen(self, temp: str) -> dict[str, Any]:
        where, page = "the business dashboard", self.page
        status = await self.text("#filing-status", where, r"DRAFT|PENDING|PAID|COMPLETED")
        seen: dict[str, Any] = {"status": status, "temporary_number": temp,
                                "filed": await page.locator("#legal-name").count() > 0}
        if seen["filed"]:
            seen["legal_name"] = await self.text("#legal-name", where)
        if status == "COMPLETED":
            seen["incorporation_number"] = await self.text("#incorporation-number", where,
                                                           r"BC\d{7}")
            seen["certificate"] = await page.locator("#certificate").get_attribute("href")
        if await page.locator("#payment-error").count():
            seen["draft"] = True   # PayBC did not take it: saved, not paid
        return seen

    async def pay_draft(self, temp: str) -> dict[str, Any]:
        """Retry the payment of the filed, unpaid ``temp`` from its dashboard: to PayBC
        again, never File and Pay again."""
        await self.ctx.step(f"paying the saved filing {temp}")
        await self.submit("Retry Payment", "the business dashboard")
        if await self.page.locator("#payment-error").count():
            return await self._dashboard_seen(temp)
        return await self.paybc(temp)

    async def paybc(self, temp: str) -> dict[str, Any]:
        """PayBC's page (Actions.vue: AUTH_WEB_URL + makepayment/<token>/<return URL>): its
        Pay is a point of no return (submission ``paybc``); paid, PayBC returns to the
        business dashboard."""
        await self.text("#paybc-amount", "PayBC", r"Amount: \$[\d,]+\.\d\d")
        await self.shot("paybc")
        async with self.ctx.submission(PAYBC) as paid:
            await self.submit_final("Pay", "PayBC's payment", "#filing-status")
            seen = await self._dashboard_seen(temp)
            await paid.confirmed(None, temporary_number=temp, status=seen["status"])
        await self.shot("paid")
        return seen

    async def step(self, n: int) -> None:
        await self.ctx.step(STEPS[n - 1])
        await self.expect_step(STEPS[n - 1])

    async def incorporate(self, p: FileEntityPayload, entity: str, nr_number: str,
                          consent: bool, sub: Submission) -> dict[str, Any]:
        page = self.page
        await self.goto(f"{self.base}/inc", "the incorporation start page")
        await self.shot("inc-start")
        await self.submit("Start Incorporation Application", "the incorporation start page")
        # business-create-ui is opened on its temporary registration (App.vue reads
        # $route.query.id): kept before File and Pay, it is what the dashboard is read by
        temp = parse_qs(urlsplit(page.url).query).get("id", [""])[0]
        if not re.fullmatch(TEMPORARY_NUMBER, temp):
            raise PortalChanged(f"{PORTAL}: the application is not opened on a temporary "
                                f"registration ({temp!r}) — portal changed?",
                                where="the incorporation start", expected="?id=" +
                                TEMPORARY_NUMBER)
        await self.ctx.save_checkpoint(temporary_number=temp)
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
                                    "#paybc-amount, #filing-status")
            # Actions.vue: to PayBC when a payment action is required, else the dashboard
            await self.shot("filed")
            on_paybc = await page.locator("#paybc-amount").count() > 0
            seen = {"status": "PENDING", "temporary_number": temp} if on_paybc else \
                await self._dashboard_seen(temp)
            await sub.confirmed(None, temporary_number=temp, legal_name=shown,
                                draft=bool(seen.get("draft")))
        if on_paybc:
            seen = await self.paybc(temp)
            if seen.get("draft"):
                await sub.confirmed(None, **{**(sub.confirmation or {}), "draft": True})
        return seen

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
