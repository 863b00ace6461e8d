"""BC Registries stand-in: Name Request and incorporation (BC Corporate Online).

Follows docs/portals/bc.md (its sources: bcgov/namex, bcgov/namerequest,
bcgov/business-create-ui, bcgov/lear):

* **Name Request** ``/nr`` (2 steps): up to 3 names in order of preference, then the
  applicant (name, phone, e-mail). "Submit Name Request" creates the NR as namex does
  (:mod:`.standin_namex`): PENDING_PAYMENT under a temporary number ``NR L123456`` -- or is
  refused (HTTP 500, namex's words) when the same e-mail sent the same names within 2
  minutes. "Continue to Payment" (``/nr/payment``) creates its payment, which gives the NR
  its real number ``NR 1234567``, and PayBC takes the $30 [I: the stand-in's PayBC answers
  on the same page; the real one is another site]: paid, the NR goes to DRAFT and waits for
  the examiners (``decide_after_seconds``), or -- created RESERVED / COND-RESERVE
  (``staff_outcome="reserve"``: names namex would reserve at once) -- straight to APPROVED /
  CONDITIONAL. Examined (:func:`examine`): a name with a restricted word or the same as a
  live name is rejected; "Bank"/"Trust" names are CONDITIONAL (consent letter needed); the
  first name not rejected decides; staff may hold it (``staff_outcome="hold"``: HOLD) or
  namex may be updating it (``"nro_updating"``: NRO_UPDATING). Approved and conditional
  names are reserved 56 days. ``/nr/status`` is namerequest's manage page: the NR number
  (a temporary one while it has one) with the applicant's phone or e-mail.
* **Incorporation** ``/inc``: Define Your Company → Add People and Roles → Create Share
  Structure → Incorporation Agreement → Review and Confirm, with the registry's rules and
  NR checks (expired, already used/CONSUMED, rejected, type mismatch, consent); a numbered
  company when no NR is given. The temporary registration (``T`` + 9, lear's bootstrap)
  exists from the start (``?id=T…``). "File and Pay" saves the filing and, as Actions.vue
  does, sends the browser to PayBC (``/paybc/makepayment/<token>/<the dashboard>``; PayBC
  failing: the filing stays a DRAFT, PaymentErrorDialog's words); paid, PayBC returns to
  the business dashboard ``/dashboard/<T…>``: PAID, then COMPLETED with ``BC`` + 7 digits
  and a certificate PDF once the registry completes it. The dashboard is the only lookup.

The ledger is the registry's memory: every accepted Name Request and filing is an entry,
and NR states (EXPIRED, CONSUMED) are derived from it and from :func:`jobs.clock.now`.
"""


from __future__ import annotations

from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from portalq.jobs import clock
from portalq.portals.bc import standin_namex as namex
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
    paybc_up,
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
    # not examined yet: no decision shown (namerequest shows NE, "not examined")
    waiting = status in ("PENDING_PAYMENT", "DRAFT", "INPROGRESS", "HOLD", "NRO_UPDATING")
    rows = "".join(f"<tr><td>{esc(n)}</td><td>{'NE' if waiting else esc(CHOICE_STATE[d])}</td>"
                   f"<td>{'' if waiting else esc(r)}</td></tr>" for n, d, r in e["decisions"])
    name, expires = ("", "") if waiting else (e["approved_name"] or "", e["expires_on"] or "")
    return (f'<dl><dt>NR Number</dt><dd id="nr-number">{esc(e["nr_number"])}</dd>'
            f'<dt>Status</dt><dd id="nr-state">{esc(status)}</dd>'
            f'<dt>Name</dt><dd id="nr-name">{esc(name)}</dd>'
            f'<dt>Expires</dt><dd id="nr-expires">{esc(expires)}</dd>'
            f'<dt>Type</dt><dd id="nr-type">{esc(e["entity_type"])}</dd></dl>'
            + ("<p>Names are examined in order of receipt.</p>" if status == "DRAFT" else "")
            + f"<table><tr><th>Name</th><th>Decision</th><th>Reason</th></tr>{rows}</table>")


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
                 ("/inc", "Incorporate a Company"))
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
                     + field("Email", "email", kind="email"))
            names = "".join(f"<li>{esc(n)}</li>" for n in session["names"])
            return show("Applicant", (
                f"<ol>{names}</ol><p id='fee'>Fee: {NR_FEE}</p>"
                + form(url(request, "/nr/applicant"), inner, "Submit Name Request", "Send")))
        if nr_sessions.expire_due(request, session):
            return pages.session_expired(BRAND, url(request, "/nr"))
        data = await request.form()
        name, phone, email = (str(data.get(k, "")).strip() for k in ("applicant_name", "phone",
                                                                     "email"))
        if not (name and phone and "@" in email):
            return show("Applicant", alert(
                "APPLICANT_REQUIRED", "Applicant name, phone and email are required."))
        if (code := state.take_error()) is not None:
            return pages.system_error(BRAND, code)
        names, entity = session["names"], session["entity_type"]
        live = [{**e, "namex_state": reg.nr_state(e)} for e in reg.entries("name_request")]
        if namex.duplicate(live, names, namex.email_key(email), clock.now()):
            # namex answers its NameRequestIsAlreadySubmittedError with HTTP 500
            return show("Name Request", alert("ALREADY_SUBMITTED", namex.DUPLICATE_MESSAGE),
                        status=500)
        decisions = examine(names, entity, reg.names_in_use())
        chosen = next(((n, d) for n, d, _ in decisions if d != "REJECTED"), None)
        reserve = state.faults.staff_outcome == "reserve" and chosen is not None
        entry = state.record({
            "kind": "name_request", "entity_type": entity, "names": names,
            "nr_number": (temp := namex.temporary_number(
                e["temp_number"] for e in reg.entries("name_request"))),
            "temp_number": temp, "namex_state": "PENDING_PAYMENT",
            # the state namex would give it before its payment: reserved at once, or DRAFT
            # for the examiners
            "requested": ("RESERVED" if chosen and chosen[1] == "APPROVED" else "COND-RESERVE")
            if reserve else "DRAFT",
            "decisions": decisions, "state": chosen[1] if chosen else "REJECTED",
            "approved_name": chosen[0] if chosen else None,
            "expires_on": (today() + timedelta(days=RESERVATION_DAYS)).isoformat()
            if chosen else None,
            "applicant": name, "submitted_at": clock.now().isoformat(),
            "email_key": namex.email_key(email),
            "contact_keys": [contact_key(phone), contact_key(email)], "fee": NR_FEE,
            "payment": None})
        with state.lock:
            nr_sessions.end(request)
        if state.faults.drop_after_submit:
            return drop_connection(request)
        await state.hang_if_asked()
        return nr_created(request, entry)

    def nr_created(request: Request, entry: dict[str, Any], error: str = "") -> Response:
        """The NR created, unpaid: its payment (namerequest's confirm-name-request.vue)."""
        pay = (f'<input type="hidden" name="nr" value="{esc(entry["nr_number"])}">'
               f"<p id='fee'>Fee: {NR_FEE}</p>")
        return show("Confirm Name Request", error + _nr_details(reg, entry) + form(
            url(request, "/nr/payment"), pay, "Continue to Payment", "Pay"))

    @guard
    async def nr_payment(request: Request) -> Response:
        """The payment's creation (the NR's real number) and PayBC's answer in one step."""
        data = await request.form()
        if (code := state.take_error()) is not None:
            return pages.system_error(BRAND, code)
        entry = reg.nr(str(data.get("nr", "")))
        if entry is None or entry["namex_state"] != "PENDING_PAYMENT":
            return show("Name Request", alert("INVALID_STATE", "Invalid NR state"),
                        status=400)
        with state.lock:
            if entry["nr_number"] == entry["temp_number"]:
                entry["nr_number"] = namex.real_number(
                    e["nr_number"] for e in reg.entries("name_request"))
        if not paybc_up(state):
            # the NR stays unpaid under its new number [?: namerequest's words for this]
            return nr_created(request, entry, '<div role="dialog" id="payment-error"><p>'
                              "We are unable to process your payment at this time.</p></div>")
        with state.lock:
            entry.update(state.queue({}), payment={"amount": NR_FEE,
                                                   "at": clock.now().isoformat()},
                         namex_state=namex.paid(entry["namex_state"], entry["requested"]))
        if state.faults.drop_after_submit:
            return drop_connection(request)
        await state.hang_if_asked()
        return show("Name Request", _nr_details(reg, entry))

    @guard
    async def nr_status(request: Request) -> Response:
        """namerequest's manage page (existing-request-search.vue): the NR number and the
        applicant's phone or e-mail; namex's GET /namerequests matches the number, the
        phone's digits (contained) or the e-mail (its start, case aside)."""
        q = request.query_params
        inner = (field("NR Number", "nr", q.get("nr", ""))
                 + field("Applicant's Phone Number", "phone", q.get("phone", ""))
                 + field("Applicant's Notification Email", "email", q.get("email", "")))
        search = (f'<form method="get" action="{url(request, "/nr/status")}">' + inner
                  + '<button type="submit">Retrieve Name Request</button></form>')
        if "nr" not in q:
            return show("Manage My Name Request", search)
        phone, email = q.get("phone", "").strip(), q.get("email", "").strip()
        keys = {k for k in (contact_key(phone), contact_key(email)) if k}
        entry = reg.nr(q["nr"])
        found = entry is not None and bool(keys & set(entry["contact_keys"]))
        if found and entry and reg.nr_state(entry) == "PENDING_PAYMENT":
            # namex's actions for an unpaid NR include its payment
            return nr_created(request, entry, search)
        body = _nr_details(reg, entry) if found and entry else (
            '<p id="no-results">No records were found that match the information you '
            "entered.<br>Please verify the NR Number and the phone / email and try again.</p>")
        return show("Manage My Name Request", search + body)

    routes = [Route("/", home), Route("/nr", nr_start, methods=["GET", "POST"]),
              Route("/nr/applicant", nr_applicant, methods=["GET", "POST"]),
              Route("/nr/payment", nr_payment, methods=["POST"]),
              Route("/nr/status", nr_status)]
    routes += incorporation_routes(state, reg, inc_sessions, guard, show, form)
    return Starlette(routes=routes)
