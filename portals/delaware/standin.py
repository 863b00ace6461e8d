"""Delaware Division of Corporations stand-in: eCorp2's "Document Filing and Certificate
Request Service" (the facts and their sources: ``docs/portals/delaware.md``).

    GET  /                          home: the service tiles (``.service-item a``)
    GET  /services/e-filing         the e-filing app (:mod:`.delaware_spa`): priority,
                                    request type, return method, corporation name, document
                                    type, the signed certificate uploaded as a PDF ->
                                    Continue -> confirmation dialog -> payment -> "Your
                                    request has been successfully submitted" with a Service
                                    Request Number; /services/payment and
                                    /services/confirmation are the same app (deep links)
    POST /api/e-filing              the app's request: filing, document and payment [?]

No page of the real portal is known to show a request's later status (docs/portals/
delaware.md), so the stand-in has none either: what staff do later is not modelled. The
upload must be a PDF (``%PDF-``) [?: the real portal's check and words unknown]. Sign-in is the
kit's gate (off unless switched on), drawn with eCorp2's ``formcontrolname`` inputs.
"""

from __future__ import annotations

import base64
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

    @guard
    async def home(request: Request) -> Response:
        return layout(TITLE, f"<h1>{TITLE}</h1><div class=service-item><a href='{root(request)}"
                      f"/services/e-filing'>Document Filing</a></div>")

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
        entry = state.record({
            "service_request": f"{20260000 + seq}",
            "corporation_name": form["corporationName"], "document_type": form["documentType"],
            "priority": form["workFlowPriority"], "request_type": form["documentUploadRequestType"],
            "return_method": form["returnMethod"],
            "document": {"name": upload.filename, "size": len(pdf),
                         "pdf": base64.b64encode(pdf).decode()},
            "submitted": now.astimezone(DE_TZ).strftime("%m/%d/%Y %I:%M %p"),
            # never the card number: the last four digits, as a receipt shows them
            "payment": {"type": form["paymentType"], "amount": FEE, "at": now.isoformat(),
                        "card": form["cardNumber"][-4:]},
        })
        await state.hang_if_asked()
        if state.faults.drop_after_submit:
            return drop_connection(request)
        if state.faults.answer_after_submit:   # acted, and an answer no flow may trust
            return JSONResponse({"message": state.faults.answer_after_submit},
                                status_code=401)
        return JSONResponse({"serviceRequestNumber": entry["service_request"]})

    return Starlette(routes=[
        Route("/", home), Route("/services/e-filing", app), Route("/services/payment", app),
        Route("/services/confirmation", app), Route("/api/e-filing", api, methods=["POST"]),
    ])
