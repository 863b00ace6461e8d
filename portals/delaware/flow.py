"""``file_entity`` for Delaware through eCorp2's Document Filing service
(``../shared/portal-facts.md``, ``../shared/portals/delaware.txt``).

eCorp2 takes no per-field entity form: the flow signs in (the account the job holds), opens
``services/e-filing``, chooses the priority, "document filing", the return method, types
the corporation name and document type, **uploads the signed certificate as a PDF**
(the business's own ``--document``, else built from the payload: :mod:`.certificate`),
Continue, confirms the dialog, pays, and reads "Your request has been successfully
submitted" with its **Service Request Number**. Staff file it later: the job waits on the
portal (:mod:`.waiting`) and each check reads the account's request status (read-only)
until the request is filed (file number, stamped document) or rejected (their reason).

Submission ``formation``: its reference stays in portalq (the form has no client-reference
field) and is new for each submission: a request staff rejected ends that submission
(refused, with their words), and a person's retry after fixing the payload files a NEW
service request under a new key. Confirmed with ``service_request``, then ``file_number``
and ``certificate_url``. A retry of a submission whose answer was lost finds it in the
request status by corporation name and document type, submitted since the submission
began, never one of the job's earlier rejected requests (checkpoint ``de_rejected``: the
rejection came minutes before, the status still lists it): found -> that request (never
filed again); not found -> what the portal's declared rule allows (portals/lookups.py):
for Delaware never conclusive, so the job waits and, past the window, goes to a person.

Payment: the method is a secret of the secrets provider (``jobs.secrets.account_secrets``), as the
pseudo-account ``payment`` key ``method`` -- e.g. ``PORTALQ_ACCOUNT_DELAWARE_ICIS_PAYMENT_
METHOD`` -- a JSON object ``{"type": "CREDITCARD", "name", "number", "expiry", "address",
"phone"}``; never in the payload, the database or a screenshot (the fields are masked).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from portalq.jobs import clock
from portalq.jobs.business import supplied
from portalq.jobs.errors import BusinessError, RetryableError
from portalq.jobs.secrets import account_secrets
from portalq.jobs.submission import Submission
from portalq.portals.calendar import zone
from portalq.portals.delaware.certificate import certificate_pdf, check_name, document_type
from portalq.portals.entity.payload import FileEntityPayload
from portalq.portals.flows import wait_on_portal as waiting
from portalq.portals.flows.base import Evidence, browser_page, fetch_document, has_document
from portalq.portals.flows.browser import trace_secrets
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.pages import WordedPage, absolute_url
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
DE_TZ = zone("America/New_York")
#: the request status shows minutes, our clock and the portal's may differ a little
CLOCK_SLACK = timedelta(minutes=5)
API_TIMEOUT_S = 120.0


#: checkpoint key: the service request numbers of this job that staff rejected
REJECTED_KEY = "de_rejected"


class Rejected(BusinessError):
    """Staff refused a queued request (their reason in the message): nothing was filed."""

    def __init__(self, message: str, service_request: str) -> None:
        super().__init__(message)
        self.service_request = service_request


@dataclass(frozen=True)
class Request:
    """A row of the account's request status."""

    service_request: str
    status: str                     #: "Pending" | "Filed" | "Rejected" (others: unknown)
    file_number: str | None = None
    document_url: str | None = None
    reason: str = ""


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
    """Page object of eCorp2's e-filing app and the account's request status."""

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
        No answer, or one not recognised, is an unknown outcome (retryable: the retry
        reconciles through the request status)."""
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
        except Exception:
            raise RetryableError("Delaware: no answer after the payment; outcome unknown, the "
                                 "next attempt reconciles via the request status") from None
        await self.shot("submitted")
        text = " ".join((await self.page.locator("body").inner_text()).split())
        if SUCCESS in text:
            number = (await self.page.locator("table.table-borderless td").nth(1).inner_text())
            if re.fullmatch(r"\d+", number.strip()):
                return number.strip()
        # no source shows eCorp2 refusing a payment in words, so none is read into any:
        # whatever else the page says, the request may have been taken and paid
        alert = self.clean(await self.page.locator(".alert-danger").inner_text())
        raise RetryableError(f"Delaware: after the payment the page says {alert!r}; outcome "
                             "unknown, the next attempt reconciles via the request status")

    async def requests(self) -> list[tuple[Request, str, str, str]]:
        """The account's requests: (request, corporation name, document type, submitted)."""
        await self.goto(f"{self.base}/services/request-status", "the request status")
        await self.expect_step("Request Status")
        await self.shot("status")
        rows = await self.page.locator("#requests tbody tr").evaluate_all("""rows => rows.map(r => {
          const t = (s) => { const n = r.querySelector(s); return n ? n.innerText.trim() : ''; };
          const a = r.querySelector('a.document');
          return [t('.service-request'), t('.status'), t('.file-number'),
                  a ? a.getAttribute('href') : '', t('.reason'), t('.corporation'),
                  r.children[2] ? r.children[2].innerText.trim() : '', t('.submitted')]; })""")
        return [(Request(sr, status, number or None,
                         absolute_url(self.page.url, href) if href else None, reason),
                 corp, doc, submitted)
                for sr, status, number, href, reason, corp, doc, submitted in rows]

    async def lookup(self, *, service_request: str | None, corporation: str, doc_type: str,
                     since: datetime, not_these: frozenset[str] = frozenset()
                     ) -> Request | None:
        """The request by its number, else the one for this corporation and document
        submitted since ``since`` that is none of ``not_these`` (the job's requests staff
        rejected); None if the status shows none."""
        def norm(s: str) -> str:
            return " ".join(s.split()).casefold()

        for request, corp, doc, submitted in await self.requests():
            if service_request:
                if request.service_request == service_request:
                    return self._decided(request)
                continue
            if request.service_request in not_these:
                continue
            try:
                at = datetime.strptime(submitted, "%m/%d/%Y %I:%M %p").replace(tzinfo=DE_TZ)
            except ValueError:
                raise RetryableError(f"Delaware: unreadable submission time {submitted!r} in "
                                     "the request status — portal changed?") from None
            if norm(corp) == norm(corporation) and norm(doc) == norm(doc_type) \
                    and at >= since - CLOCK_SLACK:
                return self._decided(request)
        return None

    @staticmethod
    def _decided(request: Request) -> Request:
        if request.status == "Rejected":
            raise Rejected(f"Delaware rejected service request {request.service_request}: "
                           f"{request.reason}", request.service_request)
        if request.status == "Filed" and not (request.file_number and request.document_url):
            raise RetryableError("Delaware: a filed request without its file number or "
                                 "document — portal changed?")
        if request.status not in ("Pending", "Filed"):
            raise RetryableError(f"Delaware: request status {request.status!r} not "
                                 "recognised — portal changed?")
        return request


def _rejected(ctx: FlowContext[BaseModel]) -> frozenset[str]:
    numbers = ctx.checkpoints.get(REJECTED_KEY)
    return frozenset(str(n) for n in numbers) if isinstance(numbers, list) else frozenset()


async def _refused(ctx: FlowContext[BaseModel], sub: Submission, refused: Rejected) -> None:
    """Staff rejected ``sub``'s request: the submission ends refused (a retry makes a new
    one, under a new key) and its number is remembered, so that no later lookup by
    corporation and document takes that rejected request for a new one."""
    await ctx.save_checkpoint(**{REJECTED_KEY: sorted(_rejected(ctx) | {
        refused.service_request})})
    await sub.refused(str(refused))
    await waiting.decided(ctx, sub)


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
    # the reference is the submission's own: after a rejection (refused) a new one
    sub = ctx.submission(SUBMISSION)
    if sub.confirmation is not None and sub.confirmation.get("file_number"):
        return await _certificate_only(ctx, sub.confirmation)
    doc_type = document_type(p)
    doc_name, upload = await _the_document(ctx, p)   # before the browser: bad input stops here
    async with browser_page(ctx) as (page, evidence):
        de = ECorp2(ctx, page, evidence)
        await sign_in_with_account(ctx, page)   # the filing agent's account, when configured
        found: Request | None = None
        if sub.in_doubt or sub.confirmation is not None:
            # a lost answer, or a request awaiting staff: the request status (read-only)
            await ctx.step("looking the request up")
            try:
                found = await de.lookup(
                    service_request=(sub.confirmation or {}).get("service_request"),
                    corporation=str(p.legal_name), doc_type=doc_type,
                    since=waiting.submitted_at(ctx, sub), not_these=_rejected(ctx))
            except Rejected as refused:
                await _refused(ctx, sub, refused)   # decided: a person fixes it and retries
                raise
            if sub.in_doubt:
                await ctx.save_checkpoint(reconciled="found" if found else "not_found")
                if found is not None:
                    await sub.confirmed(None, service_request=found.service_request)
            if found is None and sub.confirmation is not None:
                await waiting.undecided(ctx, sub, "the request status to list service request "
                                        f"{sub.confirmation.get('service_request')}")
            elif found is None:
                await waiting.not_found_after_lost_answer(ctx, sub)  # returns if vouched
        if found is None:
            method = payment_method()
            await ctx.step("request")
            await de.fill_request(str(p.legal_name), doc_type, doc_name, upload)
            await ctx.step("submit")
            async with sub:
                number = await de.pay_and_submit(method)
                await sub.confirmed(None, service_request=number)
            # one read of the request status at once: a request staff already filed (a
            # priority one) ends now; a page that cannot be read just leaves it to the checks
            try:
                found = await de.lookup(service_request=number, corporation="", doc_type="",
                                        since=clock.now())
            except Rejected as refused:
                await _refused(ctx, sub, refused)
                raise
            except RetryableError as exc:
                log.info("job %s: request status not read after submitting (%s)",
                         ctx.job_id, exc)
            found = found or Request(number, "Pending")
        if found.status == "Filed":
            assert found.file_number and found.document_url
            await sub.confirmed(None, **{**(sub.confirmation or {}),
                                         "file_number": found.file_number,
                                         "certificate_url": found.document_url})
            await ctx.step("certificate")
            name = found.document_url.rsplit("/", 1)[-1]
            pdf = await de.pdf(found.document_url, "the stamped document")
    if found.status != "Filed":   # queued for staff: wait, holding no browser
        await waiting.undecided(ctx, sub, f"staff to file service request "
                                f"{found.service_request}")
    await waiting.decided(ctx, sub)
    await ctx.store_document(name, "application/pdf", pdf)
    await ctx.save_checkpoint(documents=[name])
    return {"file_number": found.file_number, "service_request": found.service_request,
            "entity_name": p.legal_name, "documents": [name]}


async def _certificate_only(ctx: FlowContext[BaseModel], cp: Mapping[str, Any]
                            ) -> dict[str, Any]:
    """Filed by an earlier attempt: never the portal's form again, only the document."""
    url = cp.get("certificate_url", "")
    name = url.rsplit("/", 1)[-1] if url else ""
    if name and not await has_document(ctx, name):
        name, pdf = await fetch_document(ctx, url)
        await ctx.store_document(name, "application/pdf", pdf)
        await ctx.save_checkpoint(documents=[name])
    return {"file_number": cp["file_number"], "documents": [name] if name else []}
