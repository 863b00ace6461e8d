"""``obtain_ein``: an EIN from the IRS's Apply for EIN single-page app, and its CP 575 letter.

Follows ``shared/portal-facts.md`` ("IRS — EIN application"): the app at ``/applyein/``,
steps by ``history.push``, answers inline (:mod:`portals.irs.answers` classifies
every one of them), "Submit EIN Request" as the point of no return, the letter only in the
success page (a ``data:`` PDF).

Submission ``ein_application``: confirmed with ``ein``, ``legal_name`` and ``name_control``
(captured from the page before anything else); refused with the IRS reference (nothing
issued). The IRS has no lookup: a submission without an answer is never sent again
(``UncertainOutcome``). The identity -> submit part never appears in a trace.
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
                    "CORPORATION": "CORPORATIONS", "PARTNERSHIP": "PARTNERSHIPS"}


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

    async def radio(self, group: str, label: str) -> None:
        """Choose ``label`` in the radio group ``group``: through the label (the inputs do
        not register a click)."""
        fieldset = await self.present(self.page.get_by_role("group", name=group, exact=True),
                                      group, "group")
        option = fieldset.locator("label").filter(
            has_text=re.compile(rf"^\s*{re.escape(label)}\s*$"))
        await (await self.present(option, f"{group}: {label}", "radio")).click()

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

    async def choose(self, label: str, value: str) -> None:
        if not await self.select(label, value):
            raise BusinessError(f"IRS Apply for EIN offers no {label!r} option {value!r}")

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
        await self.pick("legalStructureInput", STRUCTURE_VALUES[p.legal_structure], structure)
        if sub_type == "Corporation":
            await self.radio("What type of corporation are you applying for?", sub_type)
        elif sub_type:
            await self.radio("What type of partnership are you applying for?", sub_type)
        if p.legal_structure == "LLC":
            await self.fill_named("membersOfLlcInput", p.members)
        await self.choose("State where located", p.state)
        await self.pick("reasonForApplyingInputControl", p.reason, REASONS[p.reason])
        await (await self.present(self.page.get_by_label("Review and confirm", exact=True),
                                  "Review and confirm", "checkbox")).check()
        await self.go_on("Continue", "identityOfEntities", "Identity", "legal-structure")

    async def identity(self, p: ObtainEinPayload) -> None:
        rp = p.responsible_party
        await self.fill_named("responsibleFirstName", rp.first_name)
        await self.fill_named("responsibleMiddleName", rp.middle_name)
        await self.fill_named("responsibleLastName", rp.last_name)
        await self.fill("Suffix", rp.suffix)
        await self.fill_named("responsibleSsn", re.sub(r"\D", "", rp.tax_id()))
        designee = p.third_party_designee is not None
        await self.pick("entityRoleRadioInput", "no" if designee else "yes")
        # Continue runs the IRS's live TIN check and daily limit: its refusals render here
        if designee:
            await self.go_on("Continue", "thirdPartyEntries", "Identity", "identity")
            await self.designee(p)
        else:
            await self.go_on("Continue", "addAddresses", "Addresses", "identity")

    async def designee(self, p: ObtainEinPayload) -> None:
        d = p.third_party_designee
        assert d is not None
        await self.fill("Third party designee's name", d.name)
        await self.fill("Street", d.address.street)
        await self.fill("City", d.address.city)
        await self.choose("State", d.address.region)
        await self.fill("ZIP code", d.address.postal_code)
        await self.fill("Phone number", d.phone)
        await self.fill("Fax number", d.fax)
        await self.go_on("Continue", "addAddresses", "Addresses", "third-party")

    async def addresses(self, p: ObtainEinPayload) -> None:
        a = p.address
        await self.fill("Street", a.street)
        await self.fill("City", a.city)
        await self.choose("State", a.region)
        await self.fill("ZIP code", a.postal_code)
        await self.fill("Phone number", p.phone)
        await self.radio("Do you have a different mailing address?", "No")
        await self.go_on("Continue", "verifyAddresses", "Addresses", "addresses")
        await self.go_on("Continue", "additionalDetails", "Additional Details",
                         "verify-addresses")

    async def details(self, p: ObtainEinPayload) -> None:
        await self.fill("Legal name", p.legal_name)
        await self.choose("State where the entity is organized", p.state)
        await self.choose("Start month", str(p.start_month))
        await self.fill("Start year", p.start_year)
        await self.choose("Closing month of accounting year", str(p.closing_month))
        for group in ("Does the business own a highway motor vehicle with a taxable gross "
                      "weight of 55,000 pounds or more?",
                      "Does the business involve gambling or wagering?",
                      "Does the business need to file Form 720?",
                      "Does the business sell or manufacture alcohol, tobacco, or firearms?"):
            await self.radio(group, "No")
        employees = p.expected_employees > 0
        await self.radio("Does the business have or expect to have employees?",
                         "Yes" if employees else "No")
        if employees:
            await self.fill("Number of employees expected in the next 12 months",
                            p.expected_employees)
        await self.go_on("Continue", "activityAndServices", "Additional Details", "details")
        await self.radio("Which category best describes your business?", "Other")
        await self.fill("Describe the principal activity of the business", p.principal_activity)
        await self.go_on("Continue", "reviewAndSubmit", "Review & Submit", "activity")

    async def prepare_submit(self, p: ObtainEinPayload) -> Locator:
        """The review page, checked (structure and values) before anything irreversible;
        the letter choice made; the "Submit EIN Request" button."""
        await check_review(self.page, p)
        # the real review offers the letter choice only to a responsible party applying in
        # person; a designee's application is always answered by mail, to the applicant
        # (tests/facts/irs-ein-assignment.txt §5)
        if p.third_party_designee is None:
            await self.radio("Confirmation Letter", "Receive letter digitally in the next step"
                             if p.letter == "digital" else
                             "Receive letter by mail (allow up to 4 weeks for delivery)")
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
        async with untraced(page.context, secrets=ctx.secrets()):
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
