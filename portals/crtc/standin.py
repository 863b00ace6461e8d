"""CRTC stand-in: registration of a telecommunications service provider through
"My CRTC Account" (Telecom Regulatory Policy CRTC 2017-11), per ``docs/portals/crtc.md``.

``/register`` (2 steps): the **Telecom Cover Page** (company, province, services, the
designated contact, the filer's own file reference), then **Attach Documents** (the
registration letter, .pdf or .txt). The answer is a confirmation number
``CRTC-<year>-<6 digits>`` and a confirmation letter PDF for the designated contact.
``/submissions?reference=`` finds submissions by the filer's reference. With
``decide_after_seconds`` the registry queues: the answer is the dated receipt only
(confirmation number, received time), and neither the search nor the letter knows the
submission until staff have processed it.
Every accepted registration is a ledger entry (names, the letter, its digest).

``/registration-list`` (public, no sign-in): the registered providers. Staff's confirmation
letter comes first; the entity appears on the list "within 24 hours of the date the
confirmation letter is sent" [S] (``list_after_seconds`` after staff decided; 0: at once).
The list's page and words are not sourced [?]: one row per provider, its legal name and the
date it was listed.
"""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import datetime, timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from portalq.jobs import clock
from portalq.portals.calendar import zone
from portalq.portals.standin.kit import control
from portalq.portals.standin.kit import html as pages
from portalq.portals.standin.kit.control import alert, checkbox, field, search_form
from portalq.portals.standin.kit.html import esc, url
from portalq.portals.standin.kit.pdf import make_pdf, pdf_response
from portalq.portals.standin.kit.session import Sessions
from portalq.portals.standin.kit.sign_in_gate import AUTH_COOKIE
from portalq.portals.standin.kit.state import PortalState, drop_connection

BRAND = "My CRTC Account - Canadian Radio-television and Telecommunications Commission"
HOURS = ("Online submissions are normally accepted 24 hours a day; support is available "
         "Monday to Friday, 7:00 a.m. to 5:00 p.m. Eastern Time.")
TZ = zone("America/Toronto")
STEPS = ("Telecom Cover Page", "Attach Documents", "Confirmation")
PROVINCES = {"AB": "Alberta", "BC": "British Columbia", "MB": "Manitoba", "NB": "New Brunswick",
             "NL": "Newfoundland and Labrador", "NS": "Nova Scotia", "NT": "Northwest Territories",
             "NU": "Nunavut", "ON": "Ontario", "PE": "Prince Edward Island", "QC": "Quebec",
             "SK": "Saskatchewan", "YT": "Yukon"}
SERVICES = {"reseller": "Reseller of telecommunications services",
            "voip": "Local VoIP services", "long_distance": "Long distance services",
            "internet": "Internet services"}
MAX_LETTER = 2_000_000
RETURNED = "gckey_returned"
PUBLIC_PATHS = ("/registration-list",)
FIRST_NUMBER = 123


def signin_look(title: str, body: str, status: int = 200) -> Response:
    """How this portal draws its sign-in pages (see :mod:`portals.standin.kit.sign_in_gate`):
    GCKey's user name ``#token1`` and password ``#token2`` [S]."""
    for kit, gckey in (("signin-username", "token1"), ("signin-password", "token2")):
        body = body.replace(f'id="{kit}"', f'id="{gckey}"').replace(f'for="{kit}"',
                                                                    f'for="{gckey}"')
    return pages.page("GCKey", title, body, status=status)


def _gckey_return(app: ASGIApp, state: PortalState) -> ASGIApp:
    """GCKey's page after a sign-in [S]: ``h1[property=name]`` and an ``input[type=submit]``
    that must be clicked to go back to the service; until it is, the service shows it
    instead of any page. Its words are not sourced [?]."""

    def returned(auth: str) -> str:
        return hashlib.sha256(f"gckey-return:{auth}".encode()).hexdigest()[:24]

    async def gate(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not state.accounts.config.enabled:
            await app(scope, receive, send)
            return
        request = Request(scope, receive)
        r = pages.root(request)
        auth = request.cookies.get(AUTH_COOKIE, "")
        path = request.url.path[len(r):] or "/"
        if path == "/gckey/return" and request.method == "POST" and auth:
            nxt = str((await request.form()).get("next", ""))
            response: Response = RedirectResponse(nxt if nxt.startswith(f"{r}/") else f"{r}/",
                                                  status_code=303)
            response.set_cookie(RETURNED, returned(auth), path=r or "/", httponly=True,
                                samesite="lax")
        elif auth and request.cookies.get(RETURNED) != returned(auth):
            target = f"{request.url.path}?{request.url.query}".rstrip("?")
            response = pages.page("GCKey", "GCKey", (
                '<h1 property="name">You have successfully signed in with GCKey</h1>'
                "<p>Select Continue to return to My CRTC Account.</p>"
                f'<form method="post" action="{r}/gckey/return"><input type="hidden" '
                f'name="next" value="{esc(target)}"><input type="submit" value="Continue">'
                "</form>"))
        else:
            await app(scope, receive, send)
            return
        await response(scope, receive, send)

    return gate


def create_app(state: PortalState) -> ASGIApp:
    guard = pages.guard(state, pages.ca_gate(state, BRAND, HOURS))
    sessions = Sessions(state, "crtc_session")

    def show(title: str, body: str, step: int = 0, **kw: Any) -> Response:
        top = pages.progress(STEPS, step, step - 1) if step else ""
        return pages.page(BRAND, title, body, top=top, **kw)

    def registrations() -> list[dict[str, Any]]:
        return [e for e in list(state.ledger) if e.get("kind") == "registration"]

    @guard
    async def home(request: Request) -> Response:
        return show("My CRTC Account", (
            f'<ul><li><a href="{url(request, "/register")}">Register as a telecommunications '
            f'service provider</a></li><li><a href="{url(request, "/submissions")}">Find a '
            "submission</a></li></ul>"))

    def cover_page(request: Request, error: str = "", v: Any = None) -> Response:
        v = v or {}
        inner = (field("Legal name of the company", "company_name", v.get("company_name", ""))
                 + field("Incorporation number", "incorporation_number",
                         v.get("incorporation_number", ""))
                 + control.select("Province of incorporation", "province",
                             {"": "Select...", **PROVINCES}, v.get("province"))
                 + "<fieldset><legend>Services offered</legend>"
                 + "".join(checkbox(label, "services", key) for key, label in SERVICES.items())
                 + "</fieldset><fieldset><legend>Designated contact</legend>"
                 + field("Contact name", "contact_name", v.get("contact_name", ""))
                 + field("Contact email", "contact_email", v.get("contact_email", ""),
                         kind="email")
                 + field("Contact phone", "contact_phone", v.get("contact_phone", ""))
                 + "</fieldset>" + field("Your file reference", "reference",
                                         v.get("reference", "")))
        # [S] (crtc.gc.ca g100): the telecom cover page needs no activation code
        note = ('<p id="telecom-note">For telecom submission and Telecommunication service '
                "provider's registration: Select the Telecom cover page. No activation code "
                "(AC) is required for telecom submission.</p>")
        return show(STEPS[0], error + note + control.form(
            url(request, "/register"), inner, "Continue", state, renamed="Next"), step=1)

    @guard
    async def register(request: Request) -> Response:
        if request.method == "GET":
            return cover_page(request)
        data = await request.form()
        v = {k: str(data.get(k, "")).strip() for k in (
            "company_name", "incorporation_number", "province", "contact_name",
            "contact_email", "contact_phone", "reference")}
        services = [s for s in data.getlist("services") if s in SERVICES]
        if not (v["company_name"] and v["contact_name"] and "@" in v["contact_email"]
                and re.search(r"\d{7}", re.sub(r"\D", "", v["contact_phone"]))):
            error = alert("FIELDS_REQUIRED", "The company name and the designated contact's "
                          "name, email and phone are required.")
        elif v["province"] not in PROVINCES:
            error = alert("PROVINCE", "Choose a Canadian province or territory.")
        elif not services:
            error = alert("SERVICES_REQUIRED", "Choose at least one service.")
        else:
            sid, session = sessions.new(cover=v, services=services)
            session["steps"] = 1
            response = RedirectResponse(url(request, "/register/documents"), status_code=303)
            sessions.attach(response, sid)
            return response
        return cover_page(request, error, v)

    @guard
    async def documents(request: Request) -> Response:
        session = sessions.get(request)
        if session is None or (request.method == "POST"
                               and sessions.expire_due(request, session)):
            return pages.session_expired(BRAND, url(request, "/register"))
        inner = ('<div class="field"><label for="f-letter">Registration letter (PDF or text)'
                 '</label> <input type="file" id="f-letter" name="letter" accept=".pdf,.txt">'
                 "</div>")
        page = control.form(url(request, "/register/documents"), inner, "Submit Registration",
                       state, renamed="Send", multipart=True)
        cover = session["cover"]
        summary = (f'<p id="cover-summary">{esc(cover["company_name"])} '
                   f'({esc(PROVINCES[cover["province"]])})</p>')
        if request.method == "GET":
            return show(STEPS[1], summary + page, step=2)
        data = await request.form()
        letter = data.get("letter")
        body = await letter.read() if isinstance(letter, UploadFile) else b""
        name = (letter.filename or "") if isinstance(letter, UploadFile) else ""
        problem = None
        if not body or not name.lower().endswith((".pdf", ".txt")):
            problem = "Attach the registration letter as a PDF or text file."
        elif len(body) > MAX_LETTER:
            problem = "The letter is larger than 2 MB."
        elif name.lower().endswith(".pdf") and not body.startswith(b"%PDF-"):
            problem = "The attached PDF cannot be read."
        if problem:
            return show(STEPS[1], alert("LETTER", problem) + summary + page, step=2)
        if (code := state.take_error()) is not None:
            return pages.system_error(BRAND, code)
        now = clock.now().astimezone(TZ)
        number = f"CRTC-{now.year}-{FIRST_NUMBER + len(registrations()):06d}"
        entry = state.record(state.queue({
            "kind": "registration", "confirmation": number, "status": "RECEIVED",
            "received": now.strftime("%Y-%m-%d %H:%M %Z"),
            "company_name": cover["company_name"],
            "incorporation_number": cover["incorporation_number"] or None,
            "province": cover["province"], "services": session["services"],
            "contact": cover["contact_name"], "reference": cover["reference"],
            "letter": {"filename": name, "size": len(body),
                       "sha256": hashlib.sha256(body).hexdigest(),
                       "content": base64.b64encode(body).decode()},
            "submitted_on": now.date().isoformat()}))
        with state.lock:
            sessions.end(request)
        if state.faults.drop_after_submit:
            return drop_connection(request)
        await state.hang_if_asked()
        if not state.decided(entry):
            # queued for staff: the dated receipt only; the letter follows their decision
            return show("Submission received", (
                f'<dl><dt>Confirmation number</dt><dd id="confirmation-number">{number}</dd>'
                f'<dt>Received</dt><dd id="received">{entry["received"]}</dd>'
                f'<dt>Status</dt><dd id="submission-status">RECEIVED</dd></dl><p>CRTC staff '
                "will process your submission; a letter will be sent to the designated "
                "contact.</p>"), step=3)
        return show("Submission received", (
            f'<dl><dt>Confirmation number</dt><dd id="confirmation-number">{number}</dd>'
            f'<dt>Status</dt><dd id="submission-status">RECEIVED</dd></dl><p>A confirmation '
            "letter has been sent to the designated contact.</p>"
            f'<p><a id="confirmation-letter" href="{url(request, f"/letters/{number}.pdf")}">'
            "Confirmation letter (PDF)</a></p>"), step=3)

    @guard
    async def letter(request: Request) -> Response:
        number = request.path_params["number"]
        entry = next((e for e in registrations() if e["confirmation"] == number), None)
        if entry is None or not state.decided(entry):
            return show("Not found", "<p>No such letter.</p>", status=404)
        services = ", ".join(SERVICES[s] for s in entry["services"])
        issuer = "Canadian Radio-television and Telecommunications Commission"
        issued = clock.now().astimezone(TZ).date()
        pdf = make_pdf([issuer, "Registration acknowledgement", f"Date: {issued}"], [
            f"Confirmation number: {number}",
            f"To: {entry['contact']}, designated contact of {entry['company_name']}",
            f"The Commission acknowledges the registration of {entry['company_name']} as a "
            f"telecommunications service provider ({services}) under Telecom Regulatory "
            "Policy CRTC 2017-11.",
            "The list of registered providers is updated within 24 hours."],
            title="Registration acknowledgement", author=issuer, paper="Letter")
        return pdf_response(pdf, f"{number}.pdf", inline=True)

    @guard
    async def registration_list(request: Request) -> Response:
        now = clock.now()
        rows = "".join(
            f'<tr class="provider"><td class="name">{esc(e["company_name"])}</td><td '
            f'class="listed">{listed.astimezone(TZ).date().isoformat()}</td></tr>'
            for e in registrations() if (listed := _listed_at(e)) is not None and listed <= now)
        return show("Registered telecommunications service providers", (
            '<table id="registration-list"><tr><th>Legal name</th><th>Registered</th></tr>'
            f"{rows}</table>"))

    def _listed_at(e: dict[str, Any]) -> datetime | None:
        """When ``e`` appears on the public list: after staff decided, by the fault's delay."""
        if not state.decided(e):
            return None
        decided = datetime.fromisoformat(e.get("decide_at") or e["at"])
        return decided + timedelta(seconds=state.faults.list_after_seconds)

    @guard
    async def submissions(request: Request) -> Response:
        ref = request.query_params.get("reference", "").strip()
        search = search_form(url(request, "/submissions"), "Your file reference", "reference", ref)
        if not ref:
            return show("Find a submission", search)
        rows = "".join(
            f'<tr class="submission"><td class="number">{e["confirmation"]}</td>'
            f'<td class="name">{esc(e["company_name"])}</td><td class="status">{e["status"]}'
            f'</td><td><a class="letter" href="{url(request, "/letters/")}'
            f'{e["confirmation"]}.pdf">Letter</a></td></tr>'
            # a submission still queued for staff is not listed yet
            for e in registrations() if e["reference"] == ref and state.decided(e))
        result = f'<table id="submissions">{rows}</table>' if rows else (
            '<p id="no-results">No submissions match this reference.</p>')
        return show("Find a submission", search + result)

    return _gckey_return(Starlette(routes=[
        Route("/", home), Route("/register", register, methods=["GET", "POST"]),
        Route("/register/documents", documents, methods=["GET", "POST"]),
        Route("/letters/{number}.pdf", letter), Route("/submissions", submissions),
        Route("/registration-list", registration_list)]), state)
