"""IRS EIN Assistant stand-in (see shared/portal-facts.md, "IRS EIN Assistant").

    GET  /                       landing ("Begin Application"), closed notice, maintenance
    POST /begin                  new server-side session (15 min idle timeout, jobs clock)
    GET  /apply/<step>           a step; jumping ahead redirects to the earliest incomplete one
    POST /apply/<step>           validate + store; on "review" this is the submission
    GET  /letters/<token>/CP575_<epoch-ms>.pdf

Radios only register through their <label> (the inputs are visually hidden, take no pointer
events and carry no name; a label click handler fills the hidden form value). Every accepted
submission is recorded in the ledger with a SHA-256 of the SSN/ITIN, never the number itself.
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

TITLE = "EIN Assistant"
IRS_TZ = zone("America/New_York")
CLOSED = ("The EIN Assistant is not available at this time. Hours of operation: Monday to "
          "Friday, 7 a.m. to 10 p.m. Eastern Time.")
STEPS = [("legal-structure", "Legal Structure"), ("identity", "Identity"),
         ("addresses", "Addresses"), ("details", "Additional Details"),
         ("review", "Review & Submit"), ("assignment", "EIN Assignment")]
SLUGS = [s for s, _ in STEPS]
STRUCTURES = {"LLC": "Limited Liability Company (LLC)", "CORPORATION": "Corporation",
              "PARTNERSHIP": "Partnership", "SOLE_PROPRIETOR": "Sole Proprietor"}
REASONS = {"NEW_BUSINESS": "Started a new business", "HIRED_EMPLOYEES": "Hired employees",
           "BANKING_NEEDS": "Banking purposes", "CHANGING_LEGAL_STRUCTURE":
           "Changed type of organization", "PURCHASED_BUSINESS": "Purchased active business"}
STATES = ("AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE "
          "NV NH NJ NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY").split()
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
EIN_PREFIXES = ["20", "26", "27", "45", "46", "47", "81", "82", "83", "84", "85", "86", "87",
                "88", "92", "93", "98", "99"]
DAILY_LIMIT_TEXT = ("Only one EIN may be issued per responsible party per day, and an EIN has "
                    "already been issued today for this responsible party.")
ERROR_TEXT = {
    "101": "We are unable to provide you with an EIN.",
    "102": "The information you entered does not match IRS records for the responsible party.",
    "115": "Your application has been referred to an IRS representative.",
}
SYSTEM_ERROR = ("System error. We are unable to process your request. Please try again after "
                "24 hours.")

# required fields per step (radio groups included: they post through hidden inputs)
REQUIRED = {
    "legal-structure": ["legalStructure", "state", "reason"],
    "identity": ["responsibleFirstName", "responsibleLastName", "responsibleSsn", "role"],
    "addresses": ["address", "city", "addrState", "zip", "phone"],
    "details": ["legalName", "startMonth", "startYear", "closingMonth", "expectedEmployees",
                "principalActivity"],
}
OPTIONAL = {"legal-structure": ["members"], "identity": ["responsibleMiddleName",
                                                          "responsibleSuffix"]}


def _radios(name: str, options: dict[str, str]) -> str:
    items = "".join(
        f'<input type=radio id="{name}-{v}" value="{v}" class=vh tabindex=-1 aria-hidden=true>'
        f'<label for="{name}-{v}" data-value="{v}">{esc(t)}</label>' for v, t in options.items())
    hidden = f'<input type=hidden name="{name}">'
    return f'<div class=radio-group data-field="{name}">{items}{hidden}</div>'


def _select(name: str, options: list[tuple[str, str]], label: str) -> str:
    opts = "".join(f'<option value="{esc(v)}">{esc(t)}</option>' for v, t in options)
    return (f'<label for="{name}">{esc(label)}</label><select id="{name}" name="{name}">'
            f'<option value="">Select</option>{opts}</select>')


def _text(name: str, label: str, extra: str = "") -> str:
    return f'<label for="{name}">{esc(label)}</label><input id="{name}" name="{name}" {extra}>'


_RADIO_JS = """document.querySelectorAll('.radio-group label').forEach(l =>
 l.addEventListener('click', () => {
  const g = l.closest('.radio-group');
  g.querySelector('input[type=hidden]').value = l.dataset.value;
  g.querySelectorAll('label').forEach(x => x.classList.toggle('selected', x === l));
  g.dispatchEvent(new CustomEvent('choice', {bubbles: true, detail: l.dataset.value})); }));
"""
_PROGRESSIVE_JS = """const show = id => document.getElementById(id).hidden = false;
document.querySelector('[data-field=legalStructure]').addEventListener('choice', ev => {
  document.getElementById('members-group').hidden = !['LLC', 'PARTNERSHIP'].includes(ev.detail);
  show('state-group'); });
document.getElementById('state').addEventListener('change', () => show('reason-group'));
"""


def _step_body(slug: str) -> str:
    months = [(str(i + 1), m) for i, m in enumerate(MONTHS)]
    states = [(s, s) for s in STATES]
    if slug == "legal-structure":
        return (f"<fieldset id=structure-group><legend>What type of legal structure is applying "
                f"for an EIN?</legend>{_radios('legalStructure', STRUCTURES)}</fieldset>"
                f"<fieldset id=members-group hidden>"
                f"{_text('members', 'How many members?', 'type=number min=1')}</fieldset>"
                f"<fieldset id=state-group hidden>{_select('state', states, 'State where located')}"
                f"</fieldset><fieldset id=reason-group hidden><legend>Why is the entity "
                f"requesting an EIN?</legend>{_radios('reason', REASONS)}</fieldset>")
    if slug == "identity":
        return (_text("responsibleFirstName", "First name")
                + _text("responsibleMiddleName", "Middle name")
                + _text("responsibleLastName", "Last name") + _text("responsibleSuffix", "Suffix")
                + _text("responsibleSsn", "SSN/ITIN", "autocomplete=off maxlength=11 "
                        "inputmode=numeric data-sensitive")
                + "<fieldset><legend>Are you the responsible party?</legend>"
                + _radios("role", {"YES": "Yes", "NO": "No"}) + "</fieldset>")
    if slug == "addresses":
        return (_text("address", "Street address") + _text("city", "City")
                + _select("addrState", states, "State") + _text("zip", "ZIP code")
                + _text("phone", "Phone number"))
    return (_text("legalName", "Legal name of the entity")
            + _select("startMonth", months, "Start month") + _text("startYear", "Start year")
            + _select("closingMonth", months, "Closing month of accounting year")
            + _text("expectedEmployees", "Expected number of employees", "type=number min=0")
            + _text("principalActivity", "Principal activity"))


def _validate(slug: str, data: dict[str, str]) -> str | None:
    missing = [k for k in REQUIRED[slug] if not data.get(k, "").strip()]
    if missing:
        return "Please complete all required fields: " + ", ".join(missing)
    if slug == "legal-structure":
        if data["legalStructure"] not in STRUCTURES or data["reason"] not in REASONS:
            return "Please select a valid option."
        multi = data["legalStructure"] in ("LLC", "PARTNERSHIP")
        if multi and not data.get("members", "").isdigit():
            return "Please enter the number of members."
    if slug == "identity":
        digits = re.sub(r"[\s-]", "", data["responsibleSsn"])
        if not re.fullmatch(r"\d{9}", digits) or digits[:3] in ("000", "666"):
            return "The SSN/ITIN you entered is not valid."
        data["responsibleSsn"] = digits
    if slug == "addresses" and not re.fullmatch(r"\d{5}(-?\d{4})?", data["zip"]):
        return "Please enter a valid ZIP code."
    if slug == "details" and not data["startYear"].isdigit():
        return "Please enter a valid start year."
    return None


def signin_look(title: str, body: str, status: int = 200) -> Response:
    """How this portal draws its sign-in pages (see :mod:`portals.standin.kit.signin`)."""
    return layout(TITLE, f"<h1>{esc(title)}</h1>{body}", status=status)


def create_app(state: PortalState) -> Starlette:
    sessions = Sessions(state, "irs_session", timedelta(minutes=15))
    guard = pages.guard(state, pages.us_gate(state, TITLE, CLOSED))
    documents_guard = pages.guard(state, pages.us_maintenance_gate(state, TITLE))

    def progress(current: str) -> str:
        idx = SLUGS.index(current)
        items = "".join(
            f'<li class=current aria-current=step>{esc(t)} <span class=vh>active</span></li>'
            if i == idx else f"<li>{esc(t)}</li>" for i, (_, t) in enumerate(STEPS))
        return f'<ol class=progress aria-label="Progress">{items}</ol>'

    def expired() -> Response:
        return layout(TITLE, "<h1>Session expired</h1><p>Your session has expired due to "
                      "inactivity. You must start a new application; it cannot be saved.</p>")

    def error_page(code: str, text: str, extra: str = "") -> Response:
        return layout(TITLE, f"<h1>{esc(TITLE)}</h1><p class=error>{esc(text)}</p>{extra}"
                      f"<p>Reference Number {esc(code)}</p>")

    def first_incomplete(session: dict[str, Any]) -> str:
        if session.get("ein"):
            return "assignment"
        done = session["data"]
        return next((s for s in SLUGS[:4] if s not in done), "review")

    @guard
    async def landing(request: Request) -> Response:
        return layout(TITLE, f"<h1>{esc(TITLE)}</h1><p>Apply for an Employer Identification "
                      f"Number. You must complete this application in one session; it cannot "
                      f"be saved. Sessions expire after 15 minutes of inactivity.</p>"
                      f'<form method=post action="{root(request)}/begin">'
                      f"<button class=btn type=submit>Begin Application</button></form>")

    @guard
    async def begin(request: Request) -> Response:
        response = RedirectResponse(f"{root(request)}/apply/legal-structure", status_code=303)
        sessions.new(response, path=root(request), data={})
        return response

    @guard
    async def step(request: Request) -> Response:
        slug = request.path_params["step"]
        if slug not in SLUGS:
            return layout(TITLE, "<h1>Page not found</h1>", status=404)
        session = sessions.current(request)
        if session is None:
            return expired()
        earliest = first_incomplete(session)
        submitted = slug != "assignment" and session.get("ein")
        if SLUGS.index(slug) > SLUGS.index(earliest) or submitted:
            return RedirectResponse(f"{root(request)}/apply/{earliest}", status_code=303)
        if request.method == "POST":
            form = {k: str(v) for k, v in (await request.form()).items()}
            if slug == "review":
                return await submit(request, session)
            if slug == "assignment":
                return RedirectResponse(str(request.url), status_code=303)
            data = {k: form.get(k, "") for k in REQUIRED[slug] + OPTIONAL.get(slug, [])}
            problem = _validate(slug, data)
            if problem is None:
                session["data"][slug] = data
                session["steps"] += 1
                nxt = SLUGS[SLUGS.index(slug) + 1]
                return RedirectResponse(f"{root(request)}/apply/{nxt}", status_code=303)
            return render(request, slug, session, problem)
        return render(request, slug, session)

    def render(request: Request, slug: str, session: dict[str, Any],
               problem: str | None = None) -> Response:
        title = dict(STEPS)[slug]
        head = f"{progress(slug)}<h1>{esc(title)}</h1>"
        if problem:
            head += f"<p class=error role=alert>{esc(problem)}</p>"
        if slug == "assignment":
            return layout(TITLE, head + assignment_body(session))
        action = f"{root(request)}/apply/{slug}"
        if slug == "review":
            body, button = review_body(session), continue_button(state, "Submit")
        else:
            body, button = _step_body(slug), continue_button(state)
        script = dialog_script(state) + _RADIO_JS + SUBMIT_JS
        if slug == "legal-structure":
            script += _PROGRESSIVE_JS
        return layout(TITLE, f'{head}<form class=step method=post action="{action}">{body}'
                      f"</form>{button}", script=script)

    def review_body(session: dict[str, Any]) -> str:
        d = {k: v for step_data in session["data"].values() for k, v in step_data.items()}
        rows = [("Legal structure", STRUCTURES[d["legalStructure"]]),
                ("Responsible party", " ".join(filter(None, [d["responsibleFirstName"],
                 d["responsibleMiddleName"], d["responsibleLastName"], d["responsibleSuffix"]]))),
                ("Address", f'{d["address"]}, {d["city"]}, {d["addrState"]} {d["zip"]}'),
                ("Legal name", d["legalName"]), ("Principal activity", d["principalActivity"])]
        dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows)
        ssn = f"XXX-XX-{d['responsibleSsn'][-4:]}"
        return (f"<dl>{dl}<dt>SSN/ITIN</dt><dd data-sensitive>{ssn}</dd></dl>"
                "<p>By submitting, you certify the information is true and complete.</p>")

    def assignment_body(session: dict[str, Any]) -> str:
        return (f"<p>Congratulations! Your EIN has been successfully assigned.</p>"
                f"<p>EIN: <strong id=ein>{session['ein']}</strong></p>"
                f"<p>Legal name: {esc(session['legal_name'])}</p>"
                f'<p><a id=cp575 href="{session["letter_url"]}">Download your EIN confirmation '
                f"letter (CP 575)</a></p>")

    async def submit(request: Request, session: dict[str, Any]) -> Response:
        code = state.take_error()
        if code and code in ERROR_TEXT:
            return error_page(code, ERROR_TEXT[code])
        if code:
            return error_page(code, SYSTEM_ERROR)
        d = {k: v for step_data in session["data"].values() for k, v in step_data.items()}
        ssn_hash = hashlib.sha256(d["responsibleSsn"].encode()).hexdigest()
        now = clock.now()
        day = now.astimezone(IRS_TZ).date().isoformat()
        name_key = re.sub(r"\W+", " ", d["legalName"]).strip().upper()
        with state.lock:
            earlier = [e for e in state.ledger if e["ssn_sha256"] == ssn_hash]
        if any(e["name_key"] == name_key for e in earlier):
            return error_page("101", ERROR_TEXT["101"],
                              "<p>Our records show an EIN was already assigned to this entity.</p>")
        if any(e["irs_day"] == day for e in earlier):
            return error_page("101", ERROR_TEXT["101"], f"<p>{esc(DAILY_LIMIT_TEXT)}</p>")
        if state.faults.drop_before_submit:
            return drop_connection(request)
        with state.lock:
            seq = len(state.ledger) + 1
        ein = f"{random.choice(EIN_PREFIXES)}-{(1_234_567 + seq * 7_919) % 10_000_000:07d}"
        token = hashlib.sha256(f"{ein}{now.isoformat()}{random.random()}".encode()).hexdigest()[:20]
        letter = f"CP575_{int(now.timestamp() * 1000)}.pdf"
        state.record({
            "ein": ein, "legal_name": d["legalName"], "name_key": name_key,
            "ssn_sha256": ssn_hash, "irs_day": day, "legal_structure": d["legalStructure"],
            "responsible_name": f'{d["responsibleFirstName"]} {d["responsibleLastName"]}',
            "address": [d["address"], f'{d["city"]}, {d["addrState"]} {d["zip"]}'],
            "letter": letter, "token": token,
        })
        session.update(ein=ein, legal_name=d["legalName"],
                       letter_url=f"{root(request)}/letters/{token}/{letter}")
        await state.hang_if_asked()
        if state.faults.drop_after_submit:
            return drop_connection(request)
        return RedirectResponse(f"{root(request)}/apply/assignment", status_code=303)

    @documents_guard
    async def letter(request: Request) -> Response:
        token, name = request.path_params["token"], request.path_params["name"]
        entry = state.find(token=token, letter=name)
        if entry is None:
            return layout(TITLE, "<h1>Document not found</h1>", status=404)
        issued = entry["at"][:10]
        pdf = make_pdf(
            ["Department of the Treasury", "Internal Revenue Service", "Notice CP 575"],
            [f"Date of this notice: {issued}", "", f"{entry['legal_name']}", *entry["address"],
             "", "WE ASSIGNED YOU AN EMPLOYER IDENTIFICATION NUMBER",
             f"Employer Identification Number: {entry['ein']}",
             "Thank you for applying for an Employer Identification Number (EIN). We assigned "
             "you the EIN above. This EIN will identify you, your business accounts, tax "
             "returns, and documents, even if you have no employees. Please keep this notice "
             "in your permanent records.",
             f"Responsible party: {entry['responsible_name']}"])
        return pdf_response(pdf, name)

    return Starlette(routes=[
        Route("/", landing),
        Route("/begin", begin, methods=["POST"]),
        Route("/apply/{step}", step, methods=["GET", "POST"]),
        Route("/letters/{token}/{name}", letter),
    ])
