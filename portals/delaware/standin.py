"""Delaware Division of Corporations stand-in: eCorp2's "Document Filing and Certificate
Request Service" (``../shared/portals/delaware.txt``).

    GET  /                          home: the service tiles (``.service-item a``)
    GET  /services/e-filing         the e-filing app (:mod:`.delaware_spa`): priority,
                                    request type, return method, corporation name, document
                                    type, the signed certificate uploaded as a PDF ->
                                    Continue -> confirmation dialog -> payment -> "Your
                                    request has been successfully submitted" with a Service
                                    Request Number; /services/payment and
                                    /services/confirmation are the same app (deep links)
    POST /api/e-filing              the app's request: filing, document and payment [?]
    GET  /services/request-status   the account's requests [?]: service request number,
                                    corporation name, document type, submitted, status;
                                    once staff filed one, its file number and stamped document
    GET  /documents/<token>/<name>  the stamped document of a filed request

Staff decide later (``decide_after_seconds``; ``staff_outcome`` "approve" or
"reject: <reason>"); until then a request is "Pending" and has no file number. The upload
must be a PDF (``%PDF-``) [?: the real portal's check and words unknown]. Sign-in is the
kit's gate (off unless switched on), drawn with eCorp2's ``formcontrolname`` inputs.
"""

from __future__ import annotations

import base64
import hashlib
import random
from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from portalq.jobs import clock
from portalq.portals.calendar import zone
from portalq.portals.delaware import standin_page as spa
from portalq.portals.standin.kit import html as pages
from portalq.portals.standin.kit.control import dialog_script
from portalq.portals.standin.kit.html import esc, layout, root
from portalq.portals.standin.kit.pdf import make_pdf, pdf_response
from portalq.portals.standin.kit.session import Sessions
from portalq.portals.standin.kit.state import PortalState, drop_connection

TITLE = "Delaware Division of Corporations"
DE_TZ = zone("America/New_York")
# [?] the real closed notice's words; the hours are sourced (weekdays; filing dates to 22:30)
CLOSED = ("The Division of Corporations online filing system is not available at this time. "
          "Filings are accepted Monday through Friday until 10:30 p.m. Eastern Time.")
FEE = "$110.00"   # [?] the fee shown; a filing fee plus the priority's fee in reality
FIELDS = ["workFlowPriority", "documentUploadRequestType", "returnMethod", "corporationName",
          "documentType"]
PAYMENT = ["paymentType", "cardName", "cardNumber", "cardExpiry", "address", "phone"]
MAX_UPLOAD = 10 * 1024 * 1024   # [?]


def signin_look(title: str, body: str, status: int = 200) -> Response:
    """The kit's sign-in pages in eCorp2's look: its ``formcontrolname`` inputs [S]."""
    body = (body.replace('id="signin-username"', 'id="signin-username" formcontrolname="userName"')
            .replace('id="signin-password"', 'id="signin-password" formcontrolname="password"'))
    return layout(TITLE, f"<h1>{esc(title)}</h1>{body}", status=status)


def _problem(form: dict[str, str], upload: Any) -> str | None:
    missing = [k for k in FIELDS + PAYMENT if not form.get(k, "").strip()]
    if missing:
        return "Required: " + ", ".join(missing)
    if form["workFlowPriority"] not in spa.PRIORITIES \
            or form["documentUploadRequestType"] not in spa.REQUEST_TYPES \
            or form["returnMethod"] not in spa.RETURN_METHODS \
            or form["paymentType"] not in spa.PAYMENT_TYPES:
        return "Select a valid option."
    if not isinstance(upload, UploadFile):
        return "Please upload the document."
    return None


def create_app(state: PortalState) -> Starlette:
    sessions = Sessions(state, "de_session", timedelta(minutes=30))
    guard = pages.guard(state, pages.us_gate(state, TITLE, CLOSED))
    documents_guard = pages.guard(state, pages.us_maintenance_gate(state, TITLE))

    @guard
    async def home(request: Request) -> Response:
        return layout(TITLE, f"<h1>{TITLE}</h1><div class=service-item><a href='{root(request)}"
                      f"/services/e-filing'>Document Filing</a></div><div class=service-item>"
                      f"<a href='{root(request)}/services/request-status'>Request Status</a>"
                      "</div>")

    @guard
    async def app(request: Request) -> Response:
        label = "Proceed" if state.faults.changed_selector else "Continue"
        response = layout(TITLE, spa.page_body(label), script=(
            f"const API = '{root(request)}/api/e-filing';" + dialog_script(state) + spa.SCRIPT))
        # the app's session: one step in once the page is loaded (``expire_session`` drops it)
        _, session = sessions.new(response, path=root(request) or "/")
        session["steps"] = 1
        return response

    async def api(request: Request) -> Response:
        await pages.delay(state)
        if state.faults.maintenance or not state.is_open():
            return JSONResponse({"message": CLOSED}, status_code=503)
        if sessions.current(request) is None:   # [?] the real app's words and status
            return JSONResponse({"message": "Your session has timed out. Please sign in "
                                            "again."}, status_code=401)
        data = await request.form()
        form = {k: str(v) for k, v in data.items() if not isinstance(v, UploadFile)}
        upload = data.get("document")
        if (found := _problem(form, upload)) is not None:
            return JSONResponse({"message": found}, status_code=400)
        assert isinstance(upload, UploadFile)
        pdf = await upload.read()
        if not pdf.startswith(b"%PDF-") or len(pdf) > MAX_UPLOAD:
            return JSONResponse({"message": "The document must be a PDF file."},  # [?]
                                status_code=400)
        code = state.take_error()
        if code:
            return JSONResponse({"message": f"An unexpected error occurred while processing "
                                            f"your request. (Error {code})"}, status_code=500)
        now = clock.now()
        with state.lock:
            seq = len(state.ledger) + 1
        file_number = f"{7_100_000 + seq * 37:07d}"
        token = hashlib.sha256(f"{file_number}{now}{random.random()}".encode()).hexdigest()[:20]
        entry = state.record(state.queue({
            "file_number": file_number, "service_request": f"{20260000 + seq}",
            "corporation_name": form["corporationName"], "document_type": form["documentType"],
            "priority": form["workFlowPriority"], "request_type": form["documentUploadRequestType"],
            "return_method": form["returnMethod"],
            "document": {"name": upload.filename, "size": len(pdf),
                         "pdf": base64.b64encode(pdf).decode()},
            "submitted": now.astimezone(DE_TZ).strftime("%m/%d/%Y %I:%M %p"),
            "token": token, "stamped": f"Certificate_{file_number}.pdf",
            # never the card number: the last four digits, as a receipt shows them
            "payment": {"type": form["paymentType"], "amount": FEE, "at": now.isoformat(),
                        "card": form["cardNumber"][-4:]},
        }))
        await state.hang_if_asked()
        if state.faults.drop_after_submit:
            return drop_connection(request)
        if state.faults.answer_after_submit:   # acted, and an answer no flow may trust
            return JSONResponse({"message": state.faults.answer_after_submit},
                                status_code=401)
        return JSONResponse({"serviceRequestNumber": entry["service_request"]})

    @guard
    async def status(request: Request) -> Response:
        with state.lock:
            entries = list(state.ledger)
        rows = "".join(row(request, e) for e in entries)
        return layout(TITLE, "<h1>Request Status</h1><table id=requests class=table><thead><tr>"
                      "<th>Service Request Number</th><th>Corporation Name</th><th>Document "
                      "Type</th><th>Submitted</th><th>Status</th><th>File Number</th><th>"
                      f"Document</th></tr></thead><tbody>{rows}</tbody></table>")

    def row(request: Request, e: dict[str, Any]) -> str:
        """One request: pending until staff decide; filed (its file number and stamped
        document) or rejected (their reason) after."""
        cells = (f"<td class=service-request>{e['service_request']}</td><td class=corporation>"
                 f"{esc(e['corporation_name'])}</td><td>{esc(e['document_type'])}</td><td "
                 f"class=submitted>{e['submitted']}</td>")
        if not state.decided(e):
            return f"<tr class=pending>{cells}<td class=status>Pending</td><td></td><td></td></tr>"
        outcome = str(e.get("staff_outcome") or "")
        if outcome.startswith("reject"):
            reason = outcome.partition(":")[2].strip() or "Rejected by the Division."
            return (f"<tr class=rejected>{cells}<td class=status>Rejected</td><td "
                    f"class=reason colspan=2>{esc(reason)}</td></tr>")
        href = f"{root(request)}/documents/{e['token']}/{e['stamped']}"
        return (f"<tr class=filed>{cells}<td class=status>Filed</td><td class=file-number>"
                f"{e['file_number']}</td><td><a class=document href='{href}'>Stamped "
                "document</a></td></tr>")

    @documents_guard
    async def document(request: Request) -> Response:
        token, name = request.path_params["token"], request.path_params["name"]
        e = state.find(token=token, stamped=name)
        if e is None or not state.decided(e) or str(e.get("staff_outcome")).startswith("reject"):
            return layout(TITLE, "<h1>Document not found</h1>", status=404)
        # [?] the real stamped document is the uploaded one with the Division's stamp; here
        # a stamp page naming it
        filed = clock.now().astimezone(DE_TZ).strftime("%m/%d/%Y %I:%M %p")
        pdf = make_pdf(["State of Delaware", "Secretary of State", "Division of Corporations",
                        f"Delivered and FILED {filed}", f"SR {e['service_request']} - "
                        f"File Number {e['file_number']}", "", e["document_type"].upper()],
                       [f"{e['corporation_name']}", f"Document received: "
                        f"{e['document']['name']} ({e['document']['size']} bytes)"])
        return pdf_response(pdf, name)

    return Starlette(routes=[
        Route("/", home), Route("/services/e-filing", app), Route("/services/payment", app),
        Route("/services/confirmation", app), Route("/services/request-status", status),
        Route("/api/e-filing", api, methods=["POST"]), Route("/documents/{token}/{name}", document),
    ])
