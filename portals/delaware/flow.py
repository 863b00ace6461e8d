"""``file_entity`` for Delaware through eCorp2's Document Filing service (facts and their
sources: ``docs/portals/delaware.md``).

eCorp2 takes no per-field entity form: the flow signs in (the account the job holds), opens
``services/e-filing``, chooses the priority, "document filing", the return method, types
the corporation name and document type, **uploads the signed certificate as a PDF**
(the business's own ``--document``, else built from the payload: :mod:`.certificate`),
Continue, confirms the dialog, pays, and reads "Your request has been successfully
submitted" with its **Service Request Number**. Staff file it later.

No page of the real portal is known to show a request's later status (the portal's declared
lookup authority, :mod:`portals.delaware.lookup_authority`), so the flow reads none: a
submitted request waits, holding nothing, until its expected decision time, then a person
checks the account (:func:`~portals.flows.wait_on_portal.person_when_expected`). After the
payment click every answer but the Service Request Number -- none, or any words at all: no
source shows eCorp2 refusing a payment in words -- leaves the submission in doubt, and a
submission in doubt goes to a person (nothing can vouch that it was not taken): never
submitted, never paid again by the flow. A person who finds it filed completes the job with
``--confirmed-filed FILE_NUMBER``; one who finds nothing says ``--not-filed``.

Submission ``formation``: its reference stays in portalq (the form has no client-reference
field), confirmed with ``service_request``.

Payment: the method is a secret of the secrets provider (``jobs.secrets.account_secrets``), as the
pseudo-account ``payment`` key ``method`` -- e.g. ``PORTALQ_ACCOUNT_DELAWARE_ICIS_PAYMENT_
METHOD`` -- a JSON object ``{"type": "CREDITCARD", "name", "number", "expiry", "address",
"phone"}``; never in the payload, the database or a screenshot (the fields are masked).
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import BaseModel

from portalq.jobs.business import supplied
from portalq.jobs.errors import BusinessError, RetryableError, UncertainOutcome
from portalq.jobs.secrets import account_secrets
from portalq.jobs.submission import Submission
from portalq.portals.delaware.certificate import certificate_pdf, check_name, document_type
from portalq.portals.delaware.lookup_authority import FORMATION as LOOKUP
from portalq.portals.entity.payload import FileEntityPayload
from portalq.portals.flows import wait_on_portal as waiting
from portalq.portals.flows.base import Evidence, browser_page
from portalq.portals.flows.browser import trace_secrets
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.pages import WordedPage
from portalq.portals.flows.signin import sign_in_with_account

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page

log = logging.getLogger("portalq.flows")

PORTAL = "delaware_icis"
SUBMISSION = "formation"
SERVICE = "Document Filing and Certificate Request Service"
SUCCESS = "Your request has been successfully submitted"
PRIORITY = "NormalProcessing"       # _1HourService | _2HourService | SameDayService | ...
RETURN_METHOD = "RegularMail"
API_TIMEOUT_S = 120.0
#: where a person can see what became of a request: the filing agent's account, and the
#: Division's entity search (docs/portals/delaware.md gives their sources)
ENTITY_SEARCH = "https://icis.corp.delaware.gov/ecorp/entitysearch/namesearch.aspx"


class AnswerUnknown(RetryableError):
    """After the payment click, no Service Request Number: the request may have been taken
    and paid (what came instead, in its words)."""


def payment_method() -> dict[str, str]:
    raw = account_secrets.provider().get(PORTAL, "payment", "method")
    if not raw:
        raise BusinessError(f"{PORTAL}: no payment method configured (secret payment/method, "
                            f"e.g. PORTALQ_ACCOUNT_DELAWARE_ICIS_PAYMENT_METHOD); nothing filed")
    try:
        method = json.loads(raw)
        assert isinstance(method, dict) and method.get("type") in ("CREDITCARD", "ACH")
    except (ValueError, AssertionError):
        raise BusinessError(f"{PORTAL}: the payment method secret is not a JSON object with "
                            "type CREDITCARD or ACH; nothing filed") from None
    return {k: str(v) for k, v in method.items()}


class ECorp2(WordedPage):
    """Page object of eCorp2's e-filing app."""

    step_from = "heading"
    expired_phrases = (("session has timed out", "session timed out"),)

    def __init__(self, ctx: FlowContext[BaseModel], page: Page, evidence: Evidence) -> None:
        super().__init__(ctx, page, evidence, PORTAL, name="Delaware")
        self.base = ctx.portal_urls[PORTAL].rstrip("/")

    def control_of(self, name: str) -> Locator:
        return self.page.locator(f"[formcontrolname={name}]")

    async def choose(self, name: str, value: str) -> None:
        select = self.control_of(name)
        if not await select.locator(f"option[value='{value}']").count():
            raise RetryableError(f"Delaware: no option {value!r} in {name} — portal changed?")
        await select.select_option(value)

    async def fill_request(self, corporation: str, doc_type: str, doc_name: str,
                           pdf: bytes) -> None:
        await self.goto(f"{self.base}/services/e-filing", "the e-filing service")
        await self.expect_step(SERVICE)
        await self.choose("workFlowPriority", PRIORITY)
        await self.choose("documentUploadRequestType", "documentFilingRequest")
        await self.choose("returnMethod", RETURN_METHOD)
        await self.control_of("corporationName").fill(corporation)
        await self.control_of("documentType").fill(doc_type)
        await self.page.locator("input[type=file]").set_input_files(
            {"name": doc_name, "mimeType": "application/pdf", "buffer": pdf})
        await self.shot("request")
        await (await self.control("Continue", "the e-filing form")).click()
        dialog = self.page.locator(".k-dialog")
        await dialog.wait_for(state="visible")
        await self.shot("confirm")
        await dialog.locator(".k-primary").click()
        await self.control_of("paymentType").wait_for(state="visible")
        await self.expect_step(SERVICE)

    async def pay_and_submit(self, method: dict[str, str]) -> str:
        """Fill the payment and submit (the point of no return): the Service Request Number.
        No answer, or any other (:class:`AnswerUnknown`), leaves the outcome unknown."""
        trace_secrets(self.page.context, [method.get("number", ""), method.get("expiry", "")])
        await self.choose("paymentType", method["type"])
        for name, key in (("cardName", "name"), ("cardNumber", "number"),
                          ("cardExpiry", "expiry"), ("address", "address"), ("phone", "phone")):
            await self.control_of(name).fill(method.get(key, ""))
        button = self.page.locator("#payment button[type=submit].btn-primary")
        if not await button.count():
            raise RetryableError("Delaware: no payment submit button — portal changed?")
        answer = self.page.locator("table.table-borderless:visible, .alert-danger:visible")
        await button.click()
        try:
            await answer.first.wait_for(state="visible", timeout=API_TIMEOUT_S * 1000)
        except Exception:  # noqa: BLE001 - after the click every failure is "unknown"
            raise AnswerUnknown("no answer within "
                                f"{API_TIMEOUT_S:.0f} s") from None
        await self.shot("submitted")
        text = " ".join((await self.page.locator("body").inner_text()).split())
        if SUCCESS in text:
            number = (await self.page.locator("table.table-borderless td").nth(1).inner_text())
            if re.fullmatch(r"\d+", number.strip()):
                return number.strip()
        # no source shows eCorp2 refusing a payment in words, so none is read into any:
        # whatever else the page says, the request may have been taken and paid
        alert = self.clean(await self.page.locator(".alert-danger").inner_text())
        raise AnswerUnknown(f"the page says {alert!r}")


async def _the_document(ctx: FlowContext[BaseModel], p: FileEntityPayload
                        ) -> tuple[str, bytes]:
    """The business's own signed certificate (``--document``), else one built from ``p``."""
    check_name(p)
    given = [d for d in await ctx.documents_of(ctx.job_id) if supplied.is_supplied(d[0])]
    if given:
        name, _, pdf = given[0]
        if not pdf.startswith(b"%PDF-"):
            raise BusinessError(f"Delaware: the supplied document {name} is not a PDF")
        return name.removeprefix(supplied.PREFIX), pdf
    return certificate_pdf(p)


async def file_entity_de(ctx: FlowContext[FileEntityPayload]) -> dict[str, Any]:
    p = ctx.args
    sub = ctx.submission(SUBMISSION)
    doc_type = document_type(p)
    if sub.confirmation is not None:   # submitted, with staff: nothing to look at
        await _with_staff(ctx, sub, str(p.legal_name), doc_type)
    if sub.in_doubt:
        raise _lost(ctx, sub, str(p.legal_name), doc_type, "an earlier attempt's answer")
    doc_name, upload = await _the_document(ctx, p)   # before the browser: bad input stops here
    async with browser_page(ctx) as (page, evidence):
        de = ECorp2(ctx, page, evidence)
        await sign_in_with_account(ctx, page)   # the filing agent's account, when configured
        method = payment_method()
        await ctx.step("request")
        await de.fill_request(str(p.legal_name), doc_type, doc_name, upload)
        await ctx.step("submit")
        async with sub:
            try:
                number = await de.pay_and_submit(method)
            except AnswerUnknown as unknown:
                raise _lost(ctx, sub, str(p.legal_name), doc_type, str(unknown)) from None
            # the name as filed: a person's --confirmed-filed keeps it for the order's EIN
            await sub.confirmed(None, service_request=number, entity_name=str(p.legal_name))
    await _with_staff(ctx, sub, str(p.legal_name), doc_type)


def _account(ctx: FlowContext[BaseModel]) -> str:
    return (f"sign in to eCorp2 ({ctx.portal_urls[PORTAL].rstrip('/')}/) with the filing "
            "agent's account")


async def _with_staff(ctx: FlowContext[BaseModel], sub: Submission, corporation: str,
                      doc_type: str) -> NoReturn:
    """Submitted: staff file it later, and no page known to exist shows when (``LOOKUP``)."""
    assert LOOKUP.page is None, "a sourced request-status page: read it here"
    number = (sub.confirmation or {}).get("service_request")
    await waiting.person_when_expected(
        ctx, sub, what=f"staff to file service request {number}; a person checks then",
        check=f"{_account(ctx)} and see what became of service request {number} "
              f"({corporation}, {doc_type}), or find {corporation} in the entity search "
              f"({ENTITY_SEARCH}). Filed: portalq jobs retry {ctx.job_id} --confirmed-filed "
              f"FILE_NUMBER; rejected: cancel the job and enqueue the fixed order anew (a new "
              f"request, paid anew); still pending: change nothing, check again later")


def _lost(ctx: FlowContext[BaseModel], sub: Submission, corporation: str, doc_type: str,
          what: str) -> UncertainOutcome:
    """The answer to the payment is unknown: the request may have been taken and paid, and
    no page known to exist can show it (``LOOKUP``), so a person checks; never a new one."""
    return UncertainOutcome(
        f"Delaware: after the payment for {corporation} ({doc_type}; submission "
        f"{sub.reference}) {what}: no Service Request Number was read, the request may have "
        f"been taken and paid, and no page portalq knows of can tell. Nothing is filed again "
        f"by itself: {_account(ctx)} and look for a request for {corporation} submitted since "
        f"{waiting.submitted_at(ctx, sub):%Y-%m-%d %H:%M} UTC. Found: portalq jobs retry "
        f"{ctx.job_id} --confirmed-filed SERVICE_REQUEST_OR_FILE_NUMBER; none: --not-filed")
