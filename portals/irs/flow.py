"""``obtain_ein``: an EIN from the IRS's Apply for EIN single-page app, and its CP 575 letter.

Follows ``docs/portals/irs.md`` and its facts (``tests/facts/irs-*.txt``): the app at
``/applyein/``, steps by ``history.push``, answers inline (:mod:`portals.irs.answers` classifies
every one of them), "Submit EIN Request" as the point of no return, the letter only in the
success page (a ``data:`` PDF).

Submission ``ein_application``: confirmed with ``ein``, ``legal_name`` and ``name_control``
(captured from the page before anything else); refused with the IRS reference (nothing
issued). The IRS has no lookup: a submission without an answer is never sent again
(``UncertainOutcome``). Nothing from the identity page on appears in a trace (the success
page shows the SSN's last four digits).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from portalq.jobs import settings
from portalq.jobs.errors import (
    BusinessError,
    PortalChanged,
    PortalUnavailable,
    UncertainOutcome,
)
from portalq.portals.flows.base import Evidence, browser_page, download, pdf_shows
from portalq.portals.flows.browser import untraced
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.pages import AppPage
from portalq.portals.irs import handles
from portalq.portals.irs.answers import AFTER, BEFORE, Answer, classify
from portalq.portals.irs.payload import ObtainEinPayload
from portalq.portals.irs.review import REASONS, STRUCTURES, check_review
from portalq.portals.payloads import Address

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page

PORTAL = "irs_ein"
SUBMISSION = "ein_application"
EIN_RE = r"\d{2}-\d{7}"
#: the app's processing "can take up to two minutes" and its own request gives up at 90 s:
#: the flow waits longer than both, so the app's own answer is what ends the wait (ms)
PROCESSING_TIMEOUT_MS = 150_000
IDLE_QUESTION = "Do you need more time?"
#: payload legal structure -> the value of its legalStructureInput option
STRUCTURE_VALUES = {"LLC": "LLC", "SOLE_PROPRIETOR": "SOLE_PROPRIETOR",
                    "CORPORATION": "CORPORATION", "PARTNERSHIP": "PARTNERSHIP"}
#: payload letter -> the words of its confirmationLetterRadioInput option
LETTERS = {"digital": "Receive letter digitally in the next step",
           "mail": "Receive letter by mail (allow up to 4 weeks for delivery)"}
#: the responsibleSuffix select's options (ein__identity.json suffixInputControl): text -> value
SUFFIXES = {"DDS": "DDS", "MD": "MD", "PHD": "PHD", "JR": "JR", "SR": "SR", "I": "I", "II": "II",
            "III": "III", "IV": "IV", "V": "V", "VI": "VI"}


def suffix_value(suffix: str) -> str:
    """The suffix option for a payload's suffix ("Jr." -> JR); one the app does not offer is
    this job's trouble (a person gives another), not a changed page."""
    value = SUFFIXES.get(re.sub(r"[^A-Za-z]", "", suffix).upper())
    if value is None:
        raise BusinessError(f"IRS Apply for EIN offers no suffix {suffix!r} (it offers "
                            f"{', '.join(SUFFIXES)})")
    return value


def processing_timeout_ms() -> float:
    """How long the flow waits for the answer to "Submit EIN Request":
    ``PORTALQ_IRS_PROCESSING_TIMEOUT`` seconds, else :data:`PROCESSING_TIMEOUT_MS`."""
    value = settings.current(settings.TestSettings).irs_processing_timeout
    return value * 1000 if value is not None else PROCESSING_TIMEOUT_MS


class ApplyForEin(AppPage):
    """The Apply for EIN app: steps confirmed by the step indicator and the route."""

    missing_control = "{control} control not found: portal changed?"

    def __init__(self, ctx: FlowContext[BaseModel], page: Page, evidence: Evidence) -> None:
        super().__init__(ctx, page, evidence, PORTAL, name="IRS")
        self.base = ctx.portal_urls[PORTAL].rstrip("/") + "/applyein"
        self.processing_ms = processing_timeout_ms()
        self.submitted = False

    async def answer_dialog(self) -> bool:
        """The idle warning ("Do you need more time?"): yes."""
        # playwright only when a browser is needed: the CLI and enqueue never load it
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        dialog = self.page.get_by_role("dialog").filter(has_text=IDLE_QUESTION)
        if not await dialog.count():
            return False
        # the page's locator handler (obtain_ein) may answer it first, as part of this click
        with suppress(PlaywrightTimeout):
            await dialog.get_by_role("button").first.click(timeout=2000)
        await dialog.wait_for(state="detached")
        return True

    async def expect(self, route: str, step: str | None, where: str) -> None:
        """The app is at ``route`` (and its step indicator at ``step``); else raise what the
        page means (:func:`classify`)."""
        s = await self.state()
        if s.route == route and s.answer is None and (step is None or s.step == step):
            return
        raise classify(s, AFTER if self.submitted else BEFORE, where,
                       ctx=self.ctx).outcome

    async def go_on(self, button: str, route: str, step: str | None, where: str) -> None:
        await self.shot(where)
        control = await self.control(button, where)
        await self.advance(control, where)
        await self.expect(route, step, where)

    async def pick(self, name: str, value: str, label: str | None = None) -> None:
        """Choose ``value`` of the radio input ``name`` through its label (a sourced handle,
        :mod:`portals.irs.handles`). With ``label`` (the content files' words for it), the
        option must read so: the same value under other words is a changed page, never a
        choice made on a guess."""
        option = await self.present(self.page.locator(handles.option(name, value)),
                                    f"{name}={value}", "radio")
        if label is not None and (shown := " ".join((await option.inner_text()).split())) \
                != label:
            where = self.here()
            raise PortalChanged(f"IRS: the {name}={value} option reads {shown!r}, not "
                                f"{label!r}, on {where} — portal changed?", where=where,
                                expected=f'- radio "{label}"')
        await option.click()

    async def fill_named(self, name: str, value: str | int | None) -> None:
        """Type ``value`` into the input ``name`` (a sourced handle)."""
        field = await self.present(self.page.locator(handles.named(name)), name, "textbox")
        await field.fill("" if value is None else str(value))

    async def select_named(self, name: str, value: str) -> None:
        """Choose the option ``value`` of the select ``name`` (a sourced handle). Its options
        are the page's: one missing is a changed page (the drift stop), not this job's
        trouble -- for the selects whose options no capture gives (state and month lists,
        ``handles.OPTIONS_UNKNOWN``) this is where a real page that words them otherwise
        stops the flow safely."""
        select = await self.present(self.page.locator(f"select{handles.named(name)}"), name,
                                    "combobox")
        if not await select.locator(f"option[value='{value}']").count():
            where = self.here()
            raise PortalChanged(f"IRS: the {name} select offers no option {value!r} on "
                                f"{where} — portal changed?", where=where,
                                expected=f'- combobox "{name}": option "{value}"')
        await select.select_option(value)

    # ---- the steps ------------------------------------------------------------------------
    async def open(self) -> None:
        response = await self.page.goto(f"{self.base}/")
        if response is not None and response.status >= 500:
            raise PortalUnavailable(f"IRS: HTTP {response.status} at the landing page")
        begin = self.page.get_by_role("link", name="Begin Application Now", exact=True)
        if not await begin.count():
            raise classify(await self.state(), BEFORE, "the landing page", ctx=self.ctx).outcome
        await self.shot("landing")
        await self.advance(begin, "the landing page")
        await self.expect("legalStructure", "Legal Structure", "the landing page")

    async def legal_structure(self, p: ObtainEinPayload) -> None:
        structure, sub_type = STRUCTURES[p.legal_structure]
        value = STRUCTURE_VALUES[p.legal_structure]
        await self.pick("legalStructureInput", value, structure)
        # each structure's own question (tests/facts/irs-bundle-controls.txt §2); the LLC's
        # state is asked here, the others' on Additional Details
        if p.legal_structure == "SOLE_PROPRIETOR":
            await self.pick("solePropStructureInput", "SOLE_PROPRIETOR", "Sole Proprietor")
        elif p.legal_structure == "PARTNERSHIP":
            await self.pick("partnershipStructureInput", "PARTNERSHIP", sub_type)
        elif p.legal_structure == "CORPORATION":
            await self.pick("corpStructureInput", "CORPORATION", sub_type)
        else:
            await self.fill_named("membersOfLlcInput", p.members)
            await self.select_named("stateInputControl", p.state)
        await self.pick("reasonForApplyingInputControl", p.reason, REASONS[p.reason])
        await self.confirm()
        await self.go_on("Continue", "identityOfEntities", "Identity", "legal-structure")

    async def confirm(self) -> None:
        """The "Review and confirm" checkbox that ends Legal Structure and Additional Details."""
        await (await self.present(self.page.get_by_label("Review and confirm", exact=True),
                                  "Review and confirm", "checkbox")).check()

    async def person(self, first: str, middle: str | None, last: str,
                     suffix: str | None) -> None:
        """A person's name in the responsible* inputs (Identity, and the designee's on Third
        Party); the suffix is a select of the content file's choices."""
        await self.fill_named("responsibleFirstName", first)
        await self.fill_named("responsibleMiddleName", middle)
        await self.fill_named("responsibleLastName", last)
        if suffix:
            await self.select_named("responsibleSuffix", suffix_value(suffix))

    async def identity(self, p: ObtainEinPayload) -> None:
        rp = p.responsible_party
        await self.person(rp.first_name, rp.middle_name, rp.last_name, rp.suffix)
        await self.fill_named("responsibleSsn", re.sub(r"\D", "", rp.tax_id()))
        designee = p.third_party_designee is not None
        # the texts of this choice differ per structure and hold links: chosen by value
        await self.pick("entityRoleRadioInput", "no" if designee else "yes")
        # Continue runs the IRS's live TIN check and daily limit: its refusals render here
        if designee:
            await self.go_on("Continue", "thirdPartyEntries", "Identity", "identity")
            await self.designee(p)
        else:
            await self.go_on("Continue", "addAddresses", "Addresses", "identity")

    async def designee(self, p: ObtainEinPayload) -> None:
        """The Third Party page (tests/facts/irs-bundle-controls.txt §4): its texts are not
        captured, so its two questions are answered by value; the designee's name goes into
        first and last name (the page has no one-line name), its fax nowhere (no field)."""
        d = p.third_party_designee
        assert d is not None
        await self.pick("thirdPartyDesigneeInput", "yes")
        await self.pick("thirdPartyComplianceInput", "yes")
        *first, last = d.name.split()
        await self.person(" ".join(first) or last, None, last, None)
        await self.address(d.address, d.phone)
        await self.go_on("Continue", "addAddresses", "Addresses", "third-party")

    async def address(self, a: Address, phone: str) -> None:
        await self.fill_named("physicalStreet", a.street)
        await self.fill_named("physicalCity", a.city)
        await self.select_named("physicalState", a.region)
        await self.fill_named("physicalZipCode", a.postal_code)
        await self.fill_named("thePhone", phone)

    async def addresses(self, p: ObtainEinPayload) -> None:
        await self.address(p.address, p.phone)
        await self.pick("otherAddress", "no", "No")
        # straight to Additional Details: the real app has no address verification step (an
        # address suggestion renders on this page, and stops the flow there)
        await self.go_on("Continue", "additionalDetails", "Additional Details", "addresses")

    async def details(self, p: ObtainEinPayload) -> None:
        await self.fill_named("legalNameInput", p.legal_name)
        await self.fill_named("countyInput", p.county)
        await self.select_named("stateInput", p.state)
        if p.legal_structure == "LLC":
            await self.select_named("StateFiledArticlesOrganizationInput", p.state)
        elif p.legal_structure == "CORPORATION":
            await self.select_named("StateFiledArticlesIncorporationInput", p.state)
        await self.select_named("startDateMonthInput", handles.MONTHS[p.start_month - 1])
        await self.fill_named("startDateYearInput", p.start_year)
        if p.legal_structure in ("CORPORATION", "PARTNERSHIP"):  # us(entityType) in the bundle
            await self.select_named("ClosingMonthOfAccountingInput",
                                    handles.MONTHS[p.closing_month - 1])
        for name in ("highwayVehiclesInput", "gamblingWagerInput", "fileForm720Input",
                     "atfInput"):
            await self.pick(name, "no", "No")
        await self.pick("hasEmployeesInput", "no", "No")
        await self.confirm()
        await self.go_on("Continue", "activityAndServices", "Additional Details", "details")
        # the activity page's texts are not captured: "Other", then the applicant's words
        await self.pick("entityBusinessCategoryInput", "OTHER")
        await self.pick("otherInput", "OTHER")
        await self.fill_named("otherActivityTextInput", p.principal_activity)
        await self.go_on("Continue", "reviewAndSubmit", "Review & Submit", "activity")

    async def prepare_submit(self, p: ObtainEinPayload) -> Locator:
        """The review page, checked (structure and values) before anything irreversible;
        the letter choice made; the "Submit EIN Request" button."""
        await check_review(self.page, p)
        # the real review offers the letter choice only to a responsible party applying in
        # person; a designee's application is always answered by mail, to the applicant
        # (tests/facts/irs-ein-assignment.txt §5)
        if p.third_party_designee is None:
            await self.pick("confirmationLetterRadioInput",
                            "DIGITAL" if p.letter == "digital" else "MAIL",
                            LETTERS[p.letter])
        await self.shot("review")
        return await self.control("Submit EIN Request", "the review")

    async def submit_application(self, button: Locator) -> Answer:
        """Past the point of no return: the app's answer, classified."""
        self.submitted = True
        try:
            await self.advance(button, "Submit EIN Request", timeout_ms=self.processing_ms)
        except Exception as exc:  # noqa: BLE001 - after the click every failure is "unknown"
            raise UncertainOutcome(
                f"IRS EIN application submitted but no answer was received "
                f"({self.clean(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}); "
                "the IRS offers no lookup: check for an issued EIN before retrying") from None
        return classify(await self.state(), AFTER, "Submit EIN Request", ctx=self.ctx)

    async def assignment(self) -> dict[str, str]:
        """EIN, legal name and name control as the success page shows them: the rows of the
        summary table that holds "EIN assigned" (``tests/facts/irs-ein-assignment.txt``: each
        row ``<tr><td><b>label</b></td><td><b>value</b></td></tr>``; the application's summary
        below it has a "Legal name" row of its own, so only that table is read). When no EIN
        can be read the page's text is kept, sealed, for a person to copy it from."""
        rows = await self.page.evaluate("""() => {
          const label = (tr) => tr.cells.length > 1 ? tr.cells[0].innerText.trim() : null;
          const table = [...document.querySelectorAll('table')].find((t) =>
            [...t.rows].some((tr) => label(tr) === 'EIN assigned'));
          return table ? Object.fromEntries([...table.rows].filter((tr) => label(tr) !== null)
            .map((tr) => [label(tr), tr.cells[1].innerText.trim()])) : {};
        }""")
        ein = rows.get("EIN assigned", "")
        if not re.fullmatch(EIN_RE, ein):
            await self.keep_page_text()
            raise UncertainOutcome(f"IRS EIN Assignment shows no valid EIN ({ein!r}); the "
                                   "application may have been accepted: its page is kept "
                                   "(sealed) with the job's documents; check before retrying")
        return {"ein": ein, "legal_name": rows.get("Legal name", ""),
                "name_control": rows.get("Name control", "")}

    async def keep_page_text(self) -> None:
        """The success page exists once: its text and a screenshot, kept with the job
        (documents are sealed at rest) before the attempt ends."""
        with suppress(Exception):
            await self.evidence.shot(self.page, "ein-assignment-unread")
        with suppress(Exception):
            text = await self.page.locator("body").inner_text()
            await self.ctx.store_document("ein-assignment-page.txt", "text/plain",
                                          text.encode())

    async def letter(self) -> tuple[str, bytes] | None:
        """The CP 575 as the page builds it (a ``data:`` PDF); None when the letter goes by
        mail. Raises if the page offers it and it is not a PDF."""
        button = self.page.get_by_role("button", name="Download EIN confirmation Letter [PDF]",
                                       exact=True)
        if not await button.count():
            return None
        return await download(self.page, button, self.ctx.artifacts_dir)


async def obtain_ein(ctx: FlowContext[ObtainEinPayload]) -> dict[str, Any]:
    p = ctx.args
    sub = ctx.submission(SUBMISSION)
    if sub.confirmation is not None:
        return _known(ctx, sub.confirmation)
    if p.expected_employees > 0:
        # the real page then asks the first wages date and the employees by kind
        # (tests/facts/irs-bundle-controls.txt §6), which the payload does not carry
        raise BusinessError("IRS Apply for EIN: an entity expecting employees is asked its "
                            "first wages date and employees by kind, which obtain_ein does not "
                            "answer yet; apply by hand or without expected_employees")
    if sub.in_doubt:
        raise UncertainOutcome(
            f"an earlier attempt submitted the EIN application ({sub.reference}) but no "
            f"EIN was recorded; the IRS offers no lookup, so it is not resubmitted")
    async with browser_page(ctx) as (page, evidence):
        irs = ApplyForEin(ctx, page, evidence)
        await page.add_locator_handler(
            page.get_by_role("dialog").filter(has_text=IDLE_QUESTION),
            lambda dialog: dialog.get_by_role("button").first.click())
        await ctx.step("legal structure")
        await irs.open()
        await irs.legal_structure(p)
        # the rest untraced: the EIN page's summary shows the SSN's last four digits
        async with untraced(page.context, secrets=ctx.secrets(), resume=False):
            await ctx.step("identity")
            await irs.identity(p)
            await irs.addresses(p)
            await irs.details(p)
            await ctx.step("submit")
            button = await irs.prepare_submit(p)
            async with sub:
                answer = await irs.submit_application(button)
                if answer.kind != "assigned":
                    if answer.refused is not None:
                        await sub.refused(answer.refused)
                        await ctx.save_checkpoint(last_error=answer.refused)
                    raise answer.outcome
                got = await irs.assignment()  # before anything else: the only copy
                await sub.confirmed(ein=got["ein"], legal_name=got["legal_name"],
                                    name_control=got["name_control"])
            # untraced too (tests/facts/irs-ein-assignment.txt §3): the screenshot is the
            # success page's evidence
            await ctx.step("letter")
            await evidence.shot(page, "ein-assignment")
            try:
                letter = await irs.letter()
            except Exception as exc:  # noqa: BLE001 - the EIN is recorded already
                letter = None
                await ctx.save_checkpoint(letter_error=irs.clean(str(exc).splitlines()[0]))
    documents = []
    if letter is not None:
        await ctx.store_document(letter[0], "application/pdf", letter[1])  # sealed at rest
        documents = [letter[0]]
        await ctx.save_checkpoint(documents=documents)
        if not pdf_shows(letter[1], got["ein"]):  # kept all the same: a person looks
            await ctx.save_checkpoint(letter_error=f"the letter {letter[0]} does not show "
                                                   f"the EIN {got['ein']} in its text")
    return {**got, "documents": documents}


def _known(ctx: FlowContext[BaseModel], confirmation: Mapping[str, Any]) -> dict[str, Any]:
    """The EIN is known from an earlier attempt: never the portal again. The letter existed
    only in that page; a lost one is asked of the IRS by a person (letter 147C)."""
    kept = ctx.checkpoints.get("documents")
    return {"ein": confirmation["ein"], "legal_name": confirmation.get("legal_name", ""),
            "name_control": confirmation.get("name_control", ""),
            "documents": list(kept) if isinstance(kept, list) else []}
