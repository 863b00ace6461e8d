"""BC Registries stand-in: Name Request and incorporation (BC Corporate Online).

Follows ../shared/portal-facts.md (BC section):

* **Name Request** ``/nr`` (2 steps): up to 3 names in order of preference, then the
  applicant and the $30 fee. The answer is an NR number ``NR 1234567`` whose state is
  decided at once and deterministically (:func:`examine`): a name with a restricted word
  or the same as a live name is rejected; "Bank"/"Trust" names are CONDITIONAL (consent
  letter needed); the first name not rejected decides. Approved and conditional names are
  reserved 56 days. ``/nr/status`` finds a request by NR number — or by the applicant's
  optional reference [I, a stand-in liberty so an unanswered request can be reconciled] —
  plus the applicant's phone or email.
* **Incorporation** ``/inc``: Define Your Company → Add People and Roles → Create Share
  Structure → Incorporation Agreement → Review and Confirm, with the registry's rules and
  NR checks (expired, already used/CONSUMED, rejected, type mismatch, consent); a numbered
  company when no NR is given. Success: ``BC`` + 7 digits and a certificate PDF.
  ``/filings?reference=`` finds filings by the Folio/Reference Number given on review.

The ledger is the registry's memory: every accepted Name Request and filing is an entry,
and NR states (EXPIRED, CONSUMED) are derived from it and from :func:`jobs.clock.now`.
"""


from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from portalq.portals.bc.standin_incorporation import incorporation_routes
from portalq.portals.bc.standin_registry import (
    BRAND,
    CHOICE_STATE,
    ENTITY_LABELS,
    HOURS,
    NR_FEE,
    RESERVATION_DAYS,
    Registry,
    contact_key,
    examine,
    norm_nr,
    today,
)
from portalq.portals.standin.kit import control
from portalq.portals.standin.kit import html as pages
from portalq.portals.standin.kit.control import alert, field
from portalq.portals.standin.kit.html import esc, url
from portalq.portals.standin.kit.session import Sessions
from portalq.portals.standin.kit.state import PortalState, drop_connection


def _nr_details(reg: Registry, e: dict[str, Any]) -> str:
    status = reg.nr_state(e)
    waiting = status in ("INPROGRESS", "HOLD")   # not examined yet: no decision shown
    rows = "".join(f"<tr><td>{esc(n)}</td><td>{'NE' if waiting else esc(CHOICE_STATE[d])}</td>"
                   f"<td>{'' if waiting else esc(r)}</td></tr>" for n, d, r in e["decisions"])
    if waiting:
        return (f'<dl><dt>NR Number</dt><dd id="nr-number">{esc(e["nr_number"])}</dd>'
                f'<dt>Status</dt><dd id="nr-state">{status}</dd><dt>Name</dt>'
                f'<dd id="nr-name"></dd><dt>Expires</dt><dd id="nr-expires"></dd>'
                f'<dt>Type</dt><dd id="nr-type">{esc(e["entity_type"])}</dd></dl><p>Names are '
                "examined in order of receipt.</p><table><tr><th>Name</th><th>Decision</th>"
                f"<th>Reason</th></tr>{rows}</table>")
    return (f'<dl><dt>NR Number</dt><dd id="nr-number">{esc(e["nr_number"])}</dd>'
            f'<dt>Status</dt><dd id="nr-state">{esc(status)}</dd>'
            f'<dt>Name</dt><dd id="nr-name">{esc(e["approved_name"] or "")}</dd>'
            f'<dt>Expires</dt><dd id="nr-expires">{esc(e["expires_on"] or "")}</dd>'
            f'<dt>Type</dt><dd id="nr-type">{esc(e["entity_type"])}</dd></dl>'
            f"<table><tr><th>Name</th><th>Decision</th><th>Reason</th></tr>{rows}</table>")


def signin_look(title: str, body: str, status: int = 200) -> Response:
    """How this portal draws its sign-in pages (see :mod:`portals.standin.kit.sign_in_gate`)."""
    return pages.page(BRAND, title, body, status=status)


def create_app(state: PortalState) -> Starlette:
    guard = pages.guard(state, pages.ca_gate(state, BRAND, HOURS))
    reg = Registry(state)
    nr_sessions, inc_sessions = Sessions(state, "nr_session"), Sessions(state, "bc_session")

    def show(title: str, body: str, **kw: Any) -> Response:
        return pages.page(BRAND, title, body, **kw)

    def form(action: str, inner: str, button: str, renamed: str = "Next") -> str:
        return control.form(action, inner, button, state, renamed=renamed)

    @guard
    async def home(request: Request) -> Response:
        links = (("/nr", "Request a Name"), ("/nr/status", "Check a Name Request"),
                 ("/inc", "Incorporate a Company"), ("/filings", "Find a Filing"))
        return show("BC Registries", "<ul>" + "".join(
            f'<li><a href="{url(request, path)}">{text}</a></li>' for path, text in links)
            + "</ul>")

    # ---- Name Request -----------------------------------------------------------------
    def nr_names_page(request: Request, error: str = "",
                      values: dict[str, Any] | None = None) -> Response:
        v = values or {}
        inner = (control.select("Entity type", "entity_type", ENTITY_LABELS, v.get("entity_type"))
                 + "".join(field(f"Name choice {i}", f"name{i}", v.get(f"name{i}", ""))
                           for i in (1, 2, 3)))
        return show("Name Request", error + "<p>Enter up to three names in order of "
                    "preference.</p>" + form(url(request, "/nr"), inner, "Continue"))

    @guard
    async def nr_start(request: Request) -> Response:
        if request.method == "GET":
            return nr_names_page(request)
        data = await request.form()
        names = [str(data.get(f"name{i}", "")).strip() for i in (1, 2, 3)]
        names = [n for n in names if n]
        entity = str(data.get("entity_type", ""))
        if not names or entity not in ENTITY_LABELS:
            error = alert("NAMES_REQUIRED", "Enter at least one name.")
            return nr_names_page(request, error, dict(data))
        sid, session = nr_sessions.new(names=names, entity_type=entity)
        session["steps"] = 1
        response = RedirectResponse(url(request, "/nr/applicant"), status_code=303)
        nr_sessions.attach(response, sid)
        return response

    @guard
    async def nr_applicant(request: Request) -> Response:
        session = nr_sessions.get(request)
        if session is None:
            return pages.session_expired(BRAND, url(request, "/nr"))
        if request.method == "GET":
            inner = (field("Applicant name", "applicant_name") + field("Phone", "phone")
                     + field("Email", "email", kind="email")
                     + field("Your reference (optional)", "reference"))
            names = "".join(f"<li>{esc(n)}</li>" for n in session["names"])
            return show("Applicant and Payment", (
                f"<ol>{names}</ol><p id='fee'>Fee: {NR_FEE}</p>"
                + form(url(request, "/nr/applicant"), inner, "Submit and Pay", "Send")))
        if nr_sessions.expire_due(request, session):
            return pages.session_expired(BRAND, url(request, "/nr"))
        data = await request.form()
        name, phone, email = (str(data.get(k, "")).strip() for k in ("applicant_name", "phone",
                                                                     "email"))
        if not (name and phone and "@" in email):
            return show("Applicant and Payment", alert(
                "APPLICANT_REQUIRED", "Applicant name, phone and email are required."))
        if (code := state.take_error()) is not None:
            return pages.system_error(BRAND, code)
        entity = session["entity_type"]
        decisions = examine(session["names"], entity, reg.names_in_use())
        chosen = next(((n, d) for n, d, _ in decisions if d != "REJECTED"), None)
        number = reg.unique(lambda: f"NR {secrets.randbelow(9_000_000) + 1_000_000}",
                            "name_request", "nr_number")
        entry = state.record(state.queue({
            "kind": "name_request", "nr_number": number, "entity_type": entity,
            "names": session["names"], "decisions": decisions,
            "state": chosen[1] if chosen else "REJECTED",
            "approved_name": chosen[0] if chosen else None,
            "expires_on": (today() + timedelta(days=RESERVATION_DAYS)).isoformat()
            if chosen else None,
            "applicant": name, "reference": str(data.get("reference", "")).strip(),
            "contact_keys": [contact_key(phone), contact_key(email)], "fee": NR_FEE,
            "payment": {"amount": NR_FEE}}))
        with state.lock:
            nr_sessions.end(request)
        if state.faults.drop_after_submit:
            return drop_connection(request)
        await state.hang_if_asked()
        return show("Name Request Submitted", _nr_details(reg, entry))

    @guard
    async def nr_status(request: Request) -> Response:
        q = request.query_params
        inner = (field("NR number", "nr", q.get("nr", "")) + field(
            "or your reference", "reference", q.get("reference", ""))
                 + field("Applicant phone or email", "contact", q.get("contact", "")))
        search = (f'<form method="get" action="{url(request, "/nr/status")}">' + inner
                  + '<button type="submit">Search</button></form>')
        if "contact" not in q:
            return show("Check a Name Request", search)
        key, ref = contact_key(q.get("contact", "")), q.get("reference", "").strip()
        found = [e for e in reg.entries("name_request") if key and key in e["contact_keys"]
                 and ((q.get("nr") and e["nr_number"] == norm_nr(q["nr"]))
                      or (not q.get("nr") and ref and e["reference"] == ref))]
        body = "".join(_nr_details(reg, e) for e in found[-1:]) or (
            '<p id="no-results">No Name Request matches these details.</p>')
        return show("Check a Name Request", search + body)

    routes = [Route("/", home), Route("/nr", nr_start, methods=["GET", "POST"]),
              Route("/nr/applicant", nr_applicant, methods=["GET", "POST"]),
              Route("/nr/status", nr_status)]
    routes += incorporation_routes(state, reg, inc_sessions, guard, show, form)
    return Starlette(routes=routes)
