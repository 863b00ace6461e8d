"""Delaware Division of Corporations (ICIS-like) online filing stand-in.

    GET  /                         home; closed notice (200, no form) / maintenance (503)
    POST /file/begin               new session (30 min idle), then the three steps:
    GET|POST /file/<step>          entity -> details -> review (POST review = the filing)
    GET  /lookup?ref=<client ref>  filings by the filer's client reference (reconciliation)
    GET  /documents/<token>/Certificate_<file number>.pdf

Business rules a flow must treat as permanent: entity name without the required ending
(LLC: "LLC"/"L.L.C."/"Limited Liability Company"; corporation: "Inc."/"Corporation"/...),
registered office outside Delaware, and "not eligible for online filing": a corporation
authorising more than one class of stock, or a name using "Bank"/"Trust" (needs the State
Bank Commissioner's approval) — those must be filed on paper.
"""

from __future__ import annotations

import hashlib
import random
import re
from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from portalq.jobs import clock
from portalq.portals.calendar import zone
from portalq.portals.standin.kit import pages
from portalq.portals.standin.kit.control import SUBMIT_JS, continue_button, dialog_script
from portalq.portals.standin.kit.pages import esc, layout, root
from portalq.portals.standin.kit.pdf import make_pdf, pdf_response
from portalq.portals.standin.kit.session import Sessions
from portalq.portals.standin.kit.state import PortalState, drop_connection

TITLE = "Delaware Division of Corporations"
DE_TZ = zone("America/New_York")
CLOSED = ("The Division of Corporations online filing system is not available at this time. "
          "Filings are accepted Monday through Friday until 10:30 p.m. Eastern Time.")
STEPS = {"entity": "Step 1 of 3: Entity Information",
         "details": "Step 2 of 3: Registered Agent and Details",
         "review": "Step 3 of 3: Review and Submit"}
DOC_TYPES = {"LLC": "Certificate of Formation (LLC)",
             "CORPORATION": "Certificate of Incorporation (Stock Corporation)"}
ENDINGS = {"LLC": r"\b(LLC|L\.L\.C\.|Limited Liability Company)$",
           "CORPORATION": r"\b(Inc\.?|Incorporated|Corporation|Corp\.?|Company|Co\.|Limited"
                          r"|Ltd\.?)$"}
FIELDS = {"entity": ["docType", "entityName", "clientRef"],
          "details": ["agentName", "agentStreet", "agentCity", "agentState", "agentZip",
                      "authorizedPerson", "shareClasses"]}


def _field(name: str, label: str, control: str = "") -> str:
    control = control or f'<input id="{name}" name="{name}">'
    return f'<label for="{name}">{esc(label)}</label>{control}'


def _problem(slug: str, d: dict[str, str], doc_type: str) -> tuple[str, bool] | None:
    """(message, not_eligible) for invalid input, else None."""
    required = [k for k in FIELDS[slug] if k != "shareClasses" and not d.get(k, "").strip()]
    if required:
        return "Required: " + ", ".join(required), False
    if slug == "entity":
        if d["docType"] not in DOC_TYPES:
            return "Select a document type.", False
        if not re.search(ENDINGS[d["docType"]], d["entityName"].strip(), re.I):
            kind = "limited liability company" if d["docType"] == "LLC" else "corporation"
            return f"The name of a {kind} must end with a designator such as " \
                   f"{'LLC' if d['docType'] == 'LLC' else 'Inc.'}.", False
        if re.search(r"\b(bank|banking|trust)\b", d["entityName"], re.I):
            return ("Names containing 'Bank' or 'Trust' require approval of the State Bank "
                    "Commissioner."), True
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,40}", d["clientRef"]):
            return "Client reference: up to 40 letters, digits, '.', '_' or '-'.", False
    if slug == "details":
        if d["agentState"].upper() != "DE":
            return "The registered office must be located in the State of Delaware.", False
        classes = [c for c in d.get("shareClasses", "").splitlines() if c.strip()]
        if doc_type == "CORPORATION":
            if not classes:
                return "A corporation must authorise at least one class of stock.", False
            if len(classes) > 1:
                return ("Certificates of incorporation authorising more than one class of "
                        "stock must be filed by mail or courier."), True
    return None


def signin_look(title: str, body: str, status: int = 200) -> Response:
    """How this portal draws its sign-in pages (see :mod:`portals.standin.kit.signin`)."""
    return layout(TITLE, f"<h1>{esc(title)}</h1>{body}", status=status)


def create_app(state: PortalState) -> Starlette:
    sessions = Sessions(state, "de_session", timedelta(minutes=30))
    guard = pages.guard(state, pages.us_gate(state, TITLE, CLOSED))
    documents_guard = pages.guard(state, pages.us_maintenance_gate(state, TITLE))

    @guard
    async def home(request: Request) -> Response:
        r = root(request)
        return layout(TITLE, f"<h1>Online Filing</h1><form method=post action='{r}/file/begin'>"
                      f"<button class=btn type=submit>Start a New Filing</button></form>"
                      f"<p><a href='{r}/lookup'>Filing Status Lookup</a></p>")

    @guard
    async def begin(request: Request) -> Response:
        response = RedirectResponse(f"{root(request)}/file/entity", status_code=303)
        sessions.new(response, path=root(request), data={})
        return response

    def render(request: Request, slug: str, session: dict[str, Any],
               problem: str | None = None) -> Response:
        head = f"<h1>{esc(STEPS[slug])}</h1>"
        if problem:
            head += f"<p class=error role=alert>{esc(problem)}</p>"
        if slug == "entity":
            opts = "".join(f"<option value={k}>{esc(v)}</option>" for k, v in DOC_TYPES.items())
            body = (_field("docType", "Document type", f"<select id=docType name=docType>"
                           f"<option value=''>Select</option>{opts}</select>")
                    + _field("entityName", "Entity name")
                    + _field("clientRef", "Client reference (your own, for status lookup)"))
        elif slug == "details":
            body = (_field("agentName", "Registered agent name")
                    + _field("agentStreet", "Registered office street")
                    + _field("agentCity", "City") + _field("agentState", "State")
                    + _field("agentZip", "ZIP code")
                    + _field("authorizedPerson", "Authorized person / incorporator")
                    + _field("shareClasses", "Classes of stock, one per line: name: shares "
                             "(corporations only)", "<textarea id=shareClasses "
                             "name=shareClasses></textarea>"))
        else:
            d = {**session["data"]["entity"], **session["data"]["details"]}
            rows = [("Document", DOC_TYPES[d["docType"]]), ("Entity name", d["entityName"]),
                    ("Registered agent", d["agentName"]),
                    ("Registered office", f'{d["agentStreet"]}, {d["agentCity"]}, '
                                          f'{d["agentState"]} {d["agentZip"]}'),
                    ("Authorized person", d["authorizedPerson"]),
                    ("Client reference", d["clientRef"]), ("Filing fee", "$110.00")]
            items = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows)
            body = f"<dl>{items}</dl>"
        button = continue_button(state, "Submit Filing" if slug == "review" else "Continue")
        return layout(TITLE, f"{head}<form class=step method=post action='{root(request)}/file/"
                      f"{slug}'>{body}</form>{button}", script=dialog_script(state) + SUBMIT_JS)

    @guard
    async def step(request: Request) -> Response:
        slug = request.path_params["step"]
        session = sessions.current(request)
        if slug not in STEPS:
            return layout(TITLE, "<h1>Page not found</h1>", status=404)
        if session is None:
            return layout(TITLE, "<h1>Session timed out</h1><p>Your session has timed out. "
                          "Please start your filing again.</p>")
        order = list(STEPS)
        earliest = next((s for s in order[:2] if s not in session["data"]), "review")
        if order.index(slug) > order.index(earliest):
            return RedirectResponse(f"{root(request)}/file/{earliest}", status_code=303)
        if request.method == "GET":
            return render(request, slug, session)
        form = {k: str(v) for k, v in (await request.form()).items()}
        if slug == "review":
            return await submit(request, session)
        data = {k: form.get(k, "").strip() for k in FIELDS[slug]}
        doc_type = session["data"].get("entity", {}).get("docType", "")
        found = _problem(slug, data, doc_type)
        if found and found[1]:
            return layout(TITLE, f"<h1>Not eligible for online filing</h1><p class=error>"
                          f"{esc(found[0])}</p><p>This document cannot be filed online.</p>")
        if found:
            return render(request, slug, session, found[0])
        session["data"][slug] = data
        session["steps"] += 1
        return RedirectResponse(f"{root(request)}/file/{order[order.index(slug) + 1]}",
                                status_code=303)

    async def submit(request: Request, session: dict[str, Any]) -> Response:
        code = state.take_error()
        if code:
            return layout(TITLE, f"<h1>System Error</h1><p class=error>An unexpected error "
                          f"occurred while processing your filing. Please try again later. "
                          f"(Error {esc(code)})</p>", status=500)
        d = {**session["data"]["entity"], **session["data"]["details"]}
        now = clock.now()
        with state.lock:
            seq = len(state.ledger) + 1
        file_number = f"{7_100_000 + seq * 37:07d}"
        token = hashlib.sha256(f"{file_number}{now}{random.random()}".encode()).hexdigest()[:20]
        entry = state.record({
            "file_number": file_number, "service_request": f"{20260000 + seq}",
            "entity_name": d["entityName"], "entity_type": d["docType"],
            "client_ref": d["clientRef"], "agent": d["agentName"],
            "office": f'{d["agentStreet"]}, {d["agentCity"]}, DE {d["agentZip"]}',
            "authorized_person": d["authorizedPerson"],
            "share_classes": [c.strip() for c in d["shareClasses"].splitlines() if c.strip()],
            "filed": now.astimezone(DE_TZ).strftime("%m/%d/%Y %I:%M %p"),
            "token": token, "certificate": f"Certificate_{file_number}.pdf",
        })
        session["data"].clear()
        await state.hang_if_asked()
        if state.faults.drop_after_submit:
            return drop_connection(request)
        return layout(TITLE, f"<h1>Filing Accepted</h1><p>File Number: <strong id=file-number>"
                      f"{file_number}</strong></p><p>Service Request Number: "
                      f"{entry['service_request']}</p><p>Client reference: {esc(d['clientRef'])}"
                      f"</p><p><a id=certificate href='{cert_url(request, entry)}'>Download the "
                      f"filed certificate</a></p>")

    def cert_url(request: Request, entry: dict[str, Any]) -> str:
        return f"{root(request)}/documents/{entry['token']}/{entry['certificate']}"

    @guard
    async def lookup(request: Request) -> Response:
        ref = request.query_params.get("ref", "").strip()
        body = (f"<h1>Filing Status Lookup</h1><form method=get><label for=ref>Client reference"
                f"</label><input id=ref name=ref value='{esc(ref)}'><button class=btn "
                f"type=submit>Search</button></form>")
        if ref:
            with state.lock:
                hits = [e for e in state.ledger if e["client_ref"] == ref]
            if hits:
                rows = "".join(
                    f"<tr><td class=file-number>{e['file_number']}</td><td>{esc(e['entity_name'])}"
                    f"</td><td>Filed</td><td>{e['filed']}</td><td><a class=certificate "
                    f"href='{cert_url(request, e)}'>Certificate</a></td></tr>" for e in hits)
                body += (f"<table id=results><tr><th>File Number</th><th>Entity Name</th>"
                         f"<th>Status</th><th>Filed</th><th></th></tr>{rows}</table>")
            else:
                body += f"<p id=no-results>No filings found for client reference {esc(ref)}.</p>"
        return layout(TITLE, body)

    @documents_guard
    async def document(request: Request) -> Response:
        token, name = request.path_params["token"], request.path_params["name"]
        e = state.find(token=token, certificate=name)
        if e is None:
            return layout(TITLE, "<h1>Document not found</h1>", status=404)
        llc = e["entity_type"] == "LLC"
        kind = "FORMATION" if llc else "INCORPORATION"
        lines = [f"FIRST: The name of the {'limited liability company' if llc else 'corporation'}"
                 f" is {e['entity_name']}.",
                 f"SECOND: The address of its registered office in the State of Delaware is "
                 f"{e['office']}. The name of its registered agent at such address is "
                 f"{e['agent']}."]
        if not llc:
            stock = "; ".join(e["share_classes"])
            lines.append(f"THIRD: The corporation is authorized to issue: {stock}.")
        lines.append(f"IN WITNESS WHEREOF, the undersigned has executed this Certificate. "
                     f"{'Authorized Person' if llc else 'Incorporator'}: {e['authorized_person']}")
        pdf = make_pdf(["State of Delaware", "Secretary of State", "Division of Corporations",
                        f"Delivered and FILED {e['filed']}", f"SR {e['service_request']} - "
                        f"File Number {e['file_number']}", "", f"CERTIFICATE OF {kind}"], lines)
        return pdf_response(pdf, name)

    return Starlette(routes=[
        Route("/", home), Route("/file/begin", begin, methods=["POST"]),
        Route("/file/{step}", step, methods=["GET", "POST"]),
        Route("/lookup", lookup), Route("/documents/{token}/{name}", document),
    ])
