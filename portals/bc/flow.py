"""BC Registries flows: ``name_search`` (a Name Request) and ``file_entity`` for BC.

Submissions (jobs/submission.py), in this order: ``name_request`` (confirmed with
``nr_number="NR 1234567"``, ``nr_state``, ``nr_name``, ``nr_expires_on``, which are also kept
as plain checkpoints) and ``incorporation`` (confirmed with ``incorporation_number="BC1234567"``
and ``legal_name``); each reference goes in the portal's own reference field.

A retry resumes from them: an ``nr_number`` is never requested again (its state is looked
up instead); a submission in doubt is reconciled through the portal's lookup by its
reference — found: that submission is used; not found: what BC's declared rule allows
(portals/lookups.py: never conclusive, so the job waits and, past the window, a person).

File and Pay leads to PayBC, which keeps shorter hours (portals/steps.py): a job that would
reach it with PayBC closed defers to PayBC's opening before it starts (no browser, nothing
saved, no attempt); a payment that failed on the saved DRAFT is paid again as that draft.

``file_entity_bc`` chooses the company name this way: ``nr_number`` in the payload → use
it; else an NR an earlier attempt obtained; else ``legal_name`` → request an NR for it
first (applicant: the completing party with the contact email/phone), then incorporate;
neither → a numbered company ("1234567 B.C. Ltd.").

A CONDITIONAL name needs a consent letter: ``name_search`` stops with a BusinessError
naming the NR (a human obtains the consent; a retry re-reads the NR state, no new NR);
``file_entity_bc`` goes ahead only when the payload says ``nr_consent_received: true``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from portalq.jobs import clock
from portalq.jobs.errors import BusinessError, DeferUntil, PortalChanged, RetryableError
from portalq.jobs.submission import State, Submission
from portalq.portals import steps
from portalq.portals.bc import name_requests
from portalq.portals.bc.payload import Applicant, NameSearchPayload
from portalq.portals.entity.payload import FileEntityPayload
from portalq.portals.flows import wait_on_portal as waiting
from portalq.portals.flows.base import Evidence, browser_page
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.pages import PortalPage
from portalq.portals.flows.signin import sign_in_with_account
from portalq.portals.payloads import Person

if TYPE_CHECKING:
    from playwright.async_api import Page

PORTAL = "bc_corporate_online"
NAME_REQUEST, INCORPORATION = "name_request", "incorporation"
ENTITY = {"BC_COMPANY": "BC", "CORPORATION": "BC", "ULC": "ULC"}
FEES = {"BC": "$350.00", "ULC": "$1,000.00"}
STEPS = ("Define Your Company", "Add People and Roles", "Create Share Structure",
         "Incorporation Agreement", "Review and Confirm")
ROLE_LABELS = {"completing_party": "Completing Party", "incorporator": "Incorporator",
               "director": "Director"}
#: NR states that are not a decision yet (examination queue, payment, interim
#: reservations): a job waits on them, never fails (../shared/portal-facts.md, BC)
WAITING_STATES = frozenset({"DRAFT", "PENDING_PAYMENT", "INPROGRESS", "HOLD", "COND-RESERVE",
                            "RESERVED"})
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


def _nr(text: Any) -> str:
    digits = re.sub(r"\D", "", str(text or ""))
    return f"NR {digits}" if len(digits) == 7 else ""


def _norm(name: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", name.casefold()).split())


def _entity(p: FileEntityPayload | NameSearchPayload) -> str:
    kind = p.entity_type
    if kind not in ENTITY:
        raise BusinessError(f"a {kind} cannot be incorporated in British Columbia")
    return ENTITY[kind]


def usable_nr(nr: Mapping[str, Any], consent: bool) -> dict[str, Any]:
    """The NR if it can name a company, else the BusinessError saying why not."""
    number, state, name = nr["nr_number"], nr["nr_state"], nr.get("nr_name") or ""
    if state == "CONDITIONAL" and not consent:
        raise BusinessError(f"{number} is CONDITIONAL for {name!r}: consent letter needed; "
                            "a person sends it to BCRegistries@gov.bc.ca and, once it is "
                            "accepted, retries (the NR is re-read, never requested again)")
    if state == "REJECTED":
        words = "; ".join(f"{n}: {r}" for n, d, r in nr.get("nr_decisions") or [] if r)
        raise BusinessError(f"{number} is REJECTED: all names were rejected by the registry"
                            + (f" ({words})" if words else ""))
    if state not in ("APPROVED", "CONDITIONAL"):
        detail = { "EXPIRED": "the reservation expired",
                  "CONSUMED": "it was already used"}.get(state, state)
        raise BusinessError(f"{number} is {state}: {detail}")
    return dict(nr)


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
                    "#temporary-number", "the business dashboard", r"T\d{7}"),
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
        await waiting.decided(self.ctx)
        await self.ctx.step("certificate")
        if not filing.get("certificate"):
            raise RetryableError(f"{PORTAL}: no certificate link for {number}")
        data = await self.pdf(filing["certificate"], "the certificate of incorporation")
        name = f"{number}-certificate-of-incorporation.pdf"
        await self.ctx.store_document(name, "application/pdf", data)
        return {"incorporation_number": number, "legal_name": filing["legal_name"],
                "nr_number": nr_number, "documents": [name], "reconciled": reconciled}


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


async def name_search(ctx: FlowContext[NameSearchPayload]) -> dict[str, Any]:
    p = ctx.args
    retry = name_requests.plan(p.model_dump(), ctx.checkpoints)
    if retry is not None and retry.new:
        await _retire_nr(ctx)
    elif retry is not None and retry.refused and not retry.same:
        raise BusinessError(f"not requested: {retry.refused}")
    # the same names as a finished NR: it is read again below (never requested again)
    async with browser_page(ctx) as (page, evidence):
        await sign_in_with_account(ctx, page)   # a BCeID, when an account is configured
        nr = await BcPortal(ctx, page, evidence).name_request(
            p.names, ENTITY[p.entity_type], p.applicant)
    await _examined(ctx, nr)
    result = usable_nr(nr, consent=False)
    return {"nr_number": result["nr_number"], "nr_state": result["nr_state"],
            "name": result["nr_name"], "expires_on": result["nr_expires_on"]}


_NS_KEYS = ("nr_number", "nr_state", "nr_name", "nr_expires_on", "nr_decisions",
            "nr_for_names")


async def _retire_nr(ctx: FlowContext[BaseModel]) -> None:
    """The job's NR is finished (rejected, expired...) and the payload names others: keep
    it in ``earlier_nrs`` and forget its submission, so a NEW one is requested under a new
    reference."""
    cp = ctx.checkpoints
    old = ctx.submission(NAME_REQUEST)
    ref = old.earlier.reference if old.earlier else None
    earlier = cp.get("earlier_nrs")
    await old.retire(also={**dict.fromkeys(_NS_KEYS), "earlier_nrs": [
        *(earlier if isinstance(earlier, list) else []),
        {**{k: cp.get(k) for k in _NS_KEYS}, "name_request_reference": ref}]})


async def _examined(ctx: FlowContext[BaseModel], nr: Mapping[str, Any]) -> None:
    """Returns once the registry decided the NR; a state still in its queue is a wait."""
    if nr.get("nr_state") in WAITING_STATES:
        await waiting.undecided(ctx, ctx.submission(NAME_REQUEST),
                                f"examination of {nr['nr_number']} ({nr['nr_state']})")
    await waiting.decided(ctx)


_NR_KEYS = ("nr_number", "nr_state", "nr_name", "nr_expires_on", "nr_for_name")


def _nr_for_another_name(p: FileEntityPayload, cp: Mapping[str, Any]) -> bool:
    """The checkpointed NR was requested for a name the (patched) order no longer has."""
    return bool(cp.get("nr_number") and not p.nr_number and p.legal_name
                and cp.get("nr_for_name") and cp["nr_for_name"] != p.legal_name)


def _needs_nr(p: FileEntityPayload, cp: Mapping[str, Any]) -> bool:
    """This attempt requests (or awaits) the job's own NR before it can incorporate."""
    nr_number = _nr(p.nr_number) or _nr(cp.get("nr_number"))
    ours = not _nr(p.nr_number)
    return _nr_for_another_name(p, cp) or bool(
        p.legal_name and ours and (not nr_number or cp.get("nr_state") in WAITING_STATES))


def _gate_payment() -> None:
    """File and Pay leads straight to PayBC: never start towards it when PayBC would be
    closed on arrival (a deferral to its opening, no attempt spent, nothing saved)."""
    steps.gate(PORTAL, "payment", clock.now(), "the incorporation's File and Pay")


async def file_entity_bc(ctx: FlowContext[FileEntityPayload]) -> dict[str, Any]:
    p, cp = ctx.args, ctx.checkpoints
    entity = _entity(p)
    consent = p.nr_consent_received
    incorporation = ctx.submission(INCORPORATION).earlier
    if incorporation is None or incorporation.state not in (State.CONFIRMED,
                                                             State.SUBMITTING):
        if not _needs_nr(p, cp):   # else the NR first; gated again before File and Pay
            _gate_payment()
    async with browser_page(ctx) as (page, evidence):
        await sign_in_with_account(ctx, page)   # a BCeID, when an account is configured
        bc = BcPortal(ctx, page, evidence)
        if _nr_for_another_name(p, cp):
            # an admin patched the name after a rejection: that NR named the old one
            old = ctx.submission(NAME_REQUEST)
            ref = old.earlier.reference if old.earlier else None
            earlier = cp.get("earlier_nrs")
            await old.retire(also={**dict.fromkeys(_NR_KEYS), "earlier_nrs": [
                *(earlier if isinstance(earlier, list) else []),
                {**{k: cp.get(k) for k in _NR_KEYS}, "name_request_reference": ref}]})
            cp = ctx.checkpoints
        nr_number = _nr(p.nr_number) or _nr(cp.get("nr_number"))
        sub = ctx.submission(INCORPORATION)
        if sub.confirmation is not None and sub.confirmation.get("draft"):
            await _pay_draft(ctx, bc, sub)
        if sub.confirmation is not None or sub.in_doubt:
            await ctx.step("looking the filing up")
            found = await bc.find_filing(sub.reference)   # read-only
            if found:
                return await bc.finish(sub, found, nr_number or None, reconciled=True)
            if sub.confirmation is not None:
                await waiting.undecided(ctx, sub, _awaiting(sub.confirmation))
            await waiting.not_found_after_lost_answer(ctx, sub)   # returns only if vouched
        ours = not _nr(p.nr_number)   # an NR this job requests (or requested)
        if p.legal_name and ours and (not nr_number or cp.get("nr_state") in WAITING_STATES):
            party = p.completing_party
            applicant = Applicant(name=f"{party.first_name} {party.last_name}",
                                  email=p.contact_email, phone=p.contact_phone)
            await ctx.save_checkpoint(nr_for_name=p.legal_name)
            nr = await bc.name_request([p.legal_name], entity, applicant)
            await _examined(ctx, nr)
            nr_number = usable_nr(nr, consent)["nr_number"]
        _gate_payment()
        filing = await bc.incorporate(p, entity, nr_number, consent, sub)
        if filing.get("draft"):   # PayBC failed: the draft is paid later, never refiled
            raise _paybc_unavailable(str(filing["temporary_number"]))
        if "incorporation_number" not in filing:   # a temporary registration: wait
            await waiting.undecided(ctx, sub, _awaiting(filing))
        return await bc.finish(sub, filing, nr_number or None, reconciled=False)


async def _pay_draft(ctx: FlowContext[BaseModel], bc: BcPortal, sub: Submission) -> None:
    """File and Pay saved the filing as a DRAFT (PayBC failed): pay that draft from its
    dashboard within PayBC's hours -- never a second filing."""
    conf = dict(sub.confirmation or {})
    temp = str(conf["temporary_number"])
    status = await bc.draft_status(temp)   # read-only: a lost payment answer shows here
    if status == "DRAFT":
        if steps.step_opens(PORTAL, "payment", clock.now()):
            raise _paybc_unavailable(temp)
        status = await bc.pay_draft(temp)
        if status == "DRAFT":
            raise _paybc_unavailable(temp)
    await sub.confirmed(None, **{**conf, "draft": False, "draft_status": status})


def _paybc_unavailable(temp: str) -> Exception:
    """PayBC closed: wait for its opening (no attempt spent); failing within its hours: a
    retryable error (attempts and backoff, then a person)."""
    now = clock.now()
    opens = steps.step_opens(PORTAL, "payment", now)
    if opens is not None:
        return DeferUntil(f"{PORTAL}: {temp} is saved as a DRAFT; PayBC is closed, its payment "
                          f"is retried when PayBC opens at {opens:%Y-%m-%d %H:%M} UTC",
                          when=opens)
    return RetryableError(f"{PORTAL}: PayBC could not take the payment of {temp} (saved as a "
                          "DRAFT); the draft's payment is retried, never the filing")


def _awaiting(filing: Mapping[str, Any]) -> str:
    temp = filing.get("temporary_number") or filing.get("incorporation_number") or "?"
    return f"the registry to complete {temp}"
