"""The BC incorporation application of the BC Registries stand-in (see :mod:`.bc`).

Steps, in order, each confirmed by the progress indicator; a step can only be opened once
the ones before it are complete (jumping ahead redirects to the earliest incomplete one)::

    1 Define Your Company      Name Request (or a numbered company), type, office, contact
    2 Add People and Roles     exactly 1 completing party, >= 1 incorporator, >= 1 director
    3 Create Share Structure   >= 1 share class
    4 Incorporation Agreement  "sample" or "custom"
    5 Review and Confirm       fee, date and time, delivery, Completing Party Statement,
                               one Certify section, folio number
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from portalq.jobs import clock
from portalq.portals.bc import standin_registry as bc
from portalq.portals.standin.kit import html as ui
from portalq.portals.standin.kit.control import alert, checkbox, field, radio, select
from portalq.portals.standin.kit.html import esc, url
from portalq.portals.standin.kit.pdf import make_pdf, pdf_response
from portalq.portals.standin.kit.session import Sessions
from portalq.portals.standin.kit.state import PortalState, drop_connection

_OFFICE = (("Street", "street"), ("City", "city"), ("Province", "region"),
           ("Postal code", "postal_code"))


def _full(p: dict[str, Any]) -> str:
    return " ".join(x for x in (p["first_name"], p.get("middle_name"), p["last_name"]) if x)


def _people_problems(people: list[dict[str, Any]]) -> list[str]:
    count = {role: sum(role in p["roles"] for p in people) for role in bc.ROLES}
    problems = []
    if count["completing_party"] != 1:
        problems.append("There must be exactly one Completing Party.")
    if count["incorporator"] < 1:
        problems.append("At least one Incorporator is required.")
    if count["director"] < 1:
        problems.append("At least one Director is required.")
    return problems


def incorporation_routes(state: PortalState, reg: bc.Registry, sessions: Sessions,
                         guard: Callable[..., Any], show: Callable[..., Response],
                         form: Callable[..., str]) -> list[Route]:

    def step_page(request: Request, session: dict[str, Any], n: int, error: str = "") -> Response:
        body = RENDER[n](request, session)
        return show(bc.STEPS[n - 1], error + body, top=ui.progress(bc.STEPS, n, session["steps"]))

    def go(request: Request, n: int, temp: str = "") -> Response:
        # business-create-ui is opened on its temporary registration: ?id=T... (App.vue
        # reads $route.query.id)
        query = f"?id={temp}" if temp else ""
        return RedirectResponse(url(request, f"/inc/step/{n}{query}"), status_code=303)

    def continue_form(request: Request, n: int, inner: str = "") -> str:
        return form(url(request, f"/inc/step/{n}"), inner, "Continue")

    def render_company(request: Request, s: dict[str, Any]) -> str:
        c = s["company"]
        office = "".join(field(label, k, c.get(k, "")) for label, k in _OFFICE)
        inner = (select("Type of business", "entity_type", bc.ENTITY_LABELS, c.get("entity_type"))
                 + '<fieldset><legend>Company name</legend>'
                 + radio("Use an approved Name Request", "company_kind", "named",
                         c.get("company_kind"))
                 + radio("Numbered company", "company_kind", "numbered", c.get("company_kind"))
                 + field("Name Request number", "nr_number", c.get("nr_number", ""))
                 + checkbox("The consent letter for this conditional name has been received",
                            "consent", checked=bool(c.get("consent")))
                 + f"</fieldset><fieldset><legend>Registered office</legend>{office}</fieldset>"
                 + field("Email", "email", c.get("email", ""), kind="email")
                 + field("Phone", "phone", c.get("phone", "")))
        return continue_form(request, 1, inner)

    def render_people(request: Request, s: dict[str, Any]) -> str:
        rows = "".join(f'<tr class="person"><td>{esc(_full(p))}</td><td>'
                       f'{esc(", ".join(bc.ROLES[r] for r in p["roles"]))}</td></tr>'
                       for p in s["people"])
        add = ("".join(field(label, k) for label, k in (
            ("First name", "first_name"), ("Middle name", "middle_name"),
            ("Last name", "last_name")))
               + "".join(checkbox(label, "roles", role) for role, label in bc.ROLES.items()))
        return (f'<table id="people"><tr><th>Name</th><th>Roles</th></tr>{rows}</table>'
                f'<form method="post" action="{url(request, "/inc/people")}">{add}'
                '<button type="submit">Add Person</button></form>' + continue_form(request, 2))

    def render_shares(request: Request, s: dict[str, Any]) -> str:
        rows = "".join(f'<tr class="share-class"><td>{esc(c["name"])}</td><td>'
                       f'{esc(c["max_shares"] or "No maximum")}</td></tr>' for c in s["shares"])
        add = (field("Class name", "class_name")
               + field("Maximum number of shares (blank: no maximum)", "max_shares"))
        return (f'<table id="share-classes"><tr><th>Class</th><th>Maximum</th></tr>{rows}'
                f'</table><form method="post" action="{url(request, "/inc/shares")}">{add}'
                '<button type="submit">Add Share Class</button></form>'
                + continue_form(request, 3))

    def render_agreement(request: Request, s: dict[str, Any]) -> str:
        inner = (radio(bc.AGREEMENTS["sample"], "agreement", "sample", s.get("agreement"))
                 + radio(bc.AGREEMENTS["custom"], "agreement", "custom", s.get("agreement")))
        return continue_form(request, 4, inner)

    def render_review(request: Request, s: dict[str, Any]) -> str:
        c = s["company"]
        name = c.get("legal_name") or "Numbered company (name assigned on filing)"
        people = "".join(f'<li>{esc(_full(p))}: {esc(", ".join(bc.ROLES[r] for r in p["roles"]))}'
                         "</li>" for p in s["people"])
        shares = "".join(f"<li>{esc(x['name'])}</li>" for x in s["shares"])
        # the real page's sections [S]: date and time, delivery, the completing party's
        # statement (text), one Certify section, the folio number; their other words [?]
        statement = "".join(f"<li>{esc(t)}</li>" for t in bc.COMPLETING_PARTY_STATEMENT)
        inner = ('<section id="incorporation-date-time"><h2>Incorporation Date and Time</h2>'
                 "<p>The incorporation will be effective at the date and time of filing.</p>"
                 '</section><section id="document-delivery"><h2>Document Delivery</h2><p>'
                 f'{esc(c.get("email", ""))}</p></section><section id="completing-party-'
                 'statement"><h2>Completing Party Statement</h2><ul>'
                 f'{statement}</ul></section><section id="certify-section"><h2>Certify</h2>'
                 + checkbox(bc.CERTIFY, "certify") + '</section><div id="folio-number">'
                 + field("Folio or Reference Number", "folio") + "</div>")
        return (f'<dl><dt>Name</dt><dd id="review-name">{esc(name)}</dd><dt>Type</dt><dd>'
                f'{esc(bc.ENTITY_LABELS[c["entity_type"]])}</dd></dl><ul>{people}</ul>'
                f'<ul>{shares}</ul><p id="fee">Fee: {bc.FEES[c["entity_type"]]}</p>'
                + form(url(request, "/inc/step/5"), inner, "File and Pay", "Submit Filing"))

    RENDER = {1: render_company, 2: render_people, 3: render_shares, 4: render_agreement,
              5: render_review}

    def check_company(data: Any, s: dict[str, Any]) -> str | None:
        c: dict[str, Any] = {k: str(data.get(k, "")).strip() for k in (
            "entity_type", "company_kind", "nr_number", "email", "phone",
            *[k for _, k in _OFFICE])}
        c["consent"] = bool(data.get("consent"))
        s["company"] = c
        if c["entity_type"] not in bc.ENTITY_LABELS or c["company_kind"] not in (
                "named", "numbered"):
            return alert("COMPANY_REQUIRED", "Choose the type of business and the company name.")
        if not all(c[k] for _, k in _OFFICE) or "@" not in c["email"] or not c["phone"]:
            return alert("FIELDS_REQUIRED", "The registered office, email and phone are required.")
        if c["region"].upper() not in ("BC", "BRITISH COLUMBIA"):
            return alert("OFFICE_NOT_IN_BC", "The registered office must be in British Columbia.")
        c["legal_name"] = None
        if c["company_kind"] == "named":
            if problem := bc.nr_problem(reg, c["nr_number"], c["entity_type"], c["consent"]):
                return alert(*problem)
            nr = reg.nr(c["nr_number"])
            c["nr_number"], c["legal_name"] = nr["nr_number"], nr["approved_name"]  # type: ignore[index]
        else:
            c["nr_number"] = ""
        return None

    def check_step(n: int, data: Any, s: dict[str, Any]) -> str | None:
        if n == 1:
            return check_company(data, s)
        if n == 2 and (problems := _people_problems(s["people"])):
            return alert("PEOPLE_RULES", " ".join(problems))
        if n == 3 and not s["shares"]:
            return alert("SHARES_REQUIRED", "Add at least one share class.")
        if n == 4:
            s["agreement"] = data.get("agreement")
            if s["agreement"] not in ("sample", "custom"):
                return alert("AGREEMENT_REQUIRED", "Choose the incorporation agreement.")
        return None

    @guard
    async def start(request: Request) -> Response:
        if request.method == "GET":
            return show("Incorporate a Company", (
                "<p>Incorporate a BC company: you will need an approved Name Request, or you "
                "can incorporate a numbered company.</p>"
                f'<form method="post" action="{url(request, "/inc")}"><button type="submit">'
                "Start Incorporation Application</button></form>"))
        # the temporary registration (lear's bootstrap) exists from the start
        taken = {e.get("temporary_number") for e in reg.entries("incorporation")}
        while (temp := bc.temporary_number()) in taken or f"bootstrap:{temp}" in state.sessions:
            pass
        with state.lock:
            state.sessions[f"bootstrap:{temp}"] = {"temporary_number": temp}
        sid, _ = sessions.new(company={}, people=[], shares=[], agreement=None, temp=temp)
        response = go(request, 1, temp)
        sessions.attach(response, sid)
        return response

    async def _session(request: Request) -> tuple[dict[str, Any] | None, Response | None]:
        session = sessions.get(request)
        if session is None or (request.method == "POST" and sessions.expire_due(request,
                                                                                session)):
            return None, ui.session_expired(bc.BRAND, url(request, "/inc"))
        return session, None

    @guard
    async def step(request: Request) -> Response:
        n = int(request.path_params["n"])
        session, expired = await _session(request)
        if session is None:
            return expired  # type: ignore[return-value]
        if not 1 <= n <= 5 or n > session["steps"] + 1:
            return go(request, min(session["steps"] + 1, 5), session["temp"])
        if request.method == "GET":
            return step_page(request, session, n)
        data = await request.form()
        if error := check_step(n, data, session):
            return step_page(request, session, n, error)
        if n < 5:
            session["steps"] = max(session["steps"], n)
            return go(request, n + 1, session["temp"])
        return await file(request, session, data)

    @guard
    async def add(request: Request) -> Response:
        session, expired = await _session(request)
        if session is None:
            return expired  # type: ignore[return-value]
        kind = "people" if request.url.path.endswith("/people") else "shares"
        if session["steps"] < (1 if kind == "people" else 2):
            return go(request, session["steps"] + 1, session["temp"])
        data = await request.form()
        if kind == "people":
            person: dict[str, Any] = {k: str(data.get(k, "")).strip() for k in (
                "first_name", "middle_name", "last_name")}
            person["roles"] = [r for r in data.getlist("roles") if r in bc.ROLES]
            if not (person["first_name"] and person["last_name"] and person["roles"]):
                return step_page(request, session, 2, alert(
                    "PERSON_INCOMPLETE", "A person needs a first name, last name and a role."))
            session["people"].append(person)
        else:
            name, limit = str(data.get("class_name", "")).strip(), str(data.get("max_shares", ""))
            if not name or (limit.strip() and not limit.strip().isdigit()):
                return step_page(request, session, 3, alert(
                    "SHARE_CLASS_INCOMPLETE", "A share class needs a name and a valid maximum."))
            session["shares"].append({"name": name, "max_shares": int(limit) if limit.strip()
                                      else None})
        return go(request, 2 if kind == "people" else 3, session["temp"])

    async def file(request: Request, s: dict[str, Any], data: Any) -> Response:
        if not data.get("certify"):
            return step_page(request, s, 5, alert("CERTIFY_REQUIRED",   # [?] the words
                                                  "Certify the Completing Party Statement."))
        c = s["company"]
        if c["nr_number"] and (problem := bc.nr_problem(reg, c["nr_number"], c["entity_type"],
                                                      c["consent"])):
            return step_page(request, s, 5, alert(*problem))
        if (code := state.take_error()) is not None:
            return ui.system_error(bc.BRAND, code)
        number = reg.unique(lambda: f"BC{secrets.randbelow(9_000_000) + 1_000_000}",
                            "incorporation", "incorporation_number")
        suffix = "Ltd." if c["entity_type"] == "BC" else "Unlimited Liability Company"
        names = {r: [_full(p) for p in s["people"] if r in p["roles"]] for r in bc.ROLES}
        entry = state.record({
            "kind": "incorporation", "incorporation_number": number,
            "temporary_number": s["temp"],
            "legal_name": c["legal_name"] or f"{number[2:]} B.C. {suffix}",
            "entity_type": c["entity_type"], "nr_number": c["nr_number"] or None,
            "reference": str(data.get("folio", "")).strip(), "status": "PENDING",
            "completing_party": names["completing_party"][0],
            "incorporators": names["incorporator"], "directors": names["director"],
            "share_classes": [x["name"] for x in s["shares"]], "agreement": s["agreement"],
            "fee": bc.FEES[c["entity_type"]], "filed_on": bc.today().isoformat(),
            "payment": None, "decide_at": None})
        with state.lock:
            sessions.end(request)
        if not bc.paybc_up(state):
            # File and Pay saved the filing; PayBC failed: a DRAFT, to be paid again
            with state.lock:
                entry.update(status="DRAFT")
            return draft_page(request, entry, failed=True)
        if state.faults.drop_after_submit:
            return drop_connection(request)
        return to_paybc(request, entry)

    def to_paybc(request: Request, entry: dict[str, Any]) -> Response:
        """Actions.vue, File and Pay: a payment action is required, so the browser goes to
        AUTH_WEB_URL + "makepayment/<token>/" + encodeURIComponent(<the dashboard>)."""
        back = quote(url(request, f"/dashboard/{entry['temporary_number']}") +
                     f"?filing_id={entry['seq']}", safe="")
        return RedirectResponse(url(request, f"/paybc/makepayment/{entry['seq']}/{back}"),
                                status_code=303)

    def filing_by_token(token: str) -> dict[str, Any] | None:
        return next((e for e in reg.entries("incorporation") if str(e["seq"]) == token), None)

    @guard
    async def paybc(request: Request) -> Response:
        """PayBC's page for the filing's payment [?: PayBC's own words are not public here];
        paid, it returns to the dashboard (the return URL)."""
        entry = filing_by_token(request.path_params["token"])
        back = request.path_params["back"]
        if entry is None:
            return show("PayBC", "<p>No such payment.</p>", status=404)
        if request.method == "GET" or entry["status"] not in ("PENDING", "DRAFT"):
            if entry["status"] not in ("PENDING", "DRAFT"):
                return RedirectResponse(back, status_code=303)
            return show("PayBC", (
                f'<p id="paybc-amount">Amount: {entry["fee"]}</p>'
                + form(url(request, f"/paybc/makepayment/{entry['seq']}/"
                           f"{quote(back, safe='')}"), "", "Pay", "Pay Now")))
        if (code := state.take_error()) is not None:
            return ui.system_error(bc.BRAND, code)
        if not bc.paybc_up(state):
            with state.lock:
                entry.update(status="DRAFT")
            return draft_page(request, entry, failed=True)
        with state.lock:
            entry.update(state.queue({}), status="PAID", payment={
                "amount": entry["fee"], "at": clock.now().isoformat(),
                "draft": entry["status"] == "DRAFT"})   # a saved DRAFT's payment retried
        if state.faults.drop_after_submit:
            return drop_connection(request)
        await state.hang_if_asked()
        return RedirectResponse(back, status_code=303)

    def draft_page(request: Request, entry: dict[str, Any], failed: bool) -> Response:
        error = (f'<div role="dialog" id="payment-error"><h2>Unable to Process Payment</h2>'
                 f"<p>{bc.PAYMENT_ERROR}</p><p>{bc.PAYBC_HOURS}</p></div>") if failed else ""
        pay = url(request, f"/dashboard/{entry['temporary_number']}/pay")
        return show("Business Dashboard", (
            f'{error}<dl><dt>Temporary Registration</dt><dd id="temporary-number">'
            f'{entry["temporary_number"]}</dd><dt>Name</dt><dd id="legal-name">'
            f'{esc(entry["legal_name"])}</dd><dt>Status</dt><dd id="filing-status">'
            f'{entry["status"]}</dd></dl><form method="post" action="{pay}"><button '
            'type="submit">Retry Payment</button></form>'))

    @guard
    async def dashboard(request: Request) -> Response:
        """The business dashboard of a temporary registration (Actions.vue's return URL):
        its filing's status (lear: DRAFT, PENDING, PAID, COMPLETED); an unpaid filing's
        payment can be retried (POST .../pay: to PayBC again) -- the filing itself is never
        made again. A registration with nothing filed shows its application as a DRAFT."""
        temp = request.path_params["temp"]
        entry = next((e for e in reg.entries("incorporation")
                      if e.get("temporary_number") == temp), None)
        if entry is None:
            if f"bootstrap:{temp}" not in state.sessions:
                return show("Not found", "<p>No such registration.</p>", status=404)
            return show("Business Dashboard", (
                f'<dl><dt>Temporary Registration</dt><dd id="temporary-number">{temp}</dd>'
                '<dt>Status</dt><dd id="filing-status">DRAFT</dd></dl><p>Incorporation '
                "Application: not filed.</p>"))
        if entry["status"] in ("DRAFT", "PENDING"):
            if request.method == "POST":
                if not bc.paybc_up(state):
                    return draft_page(request, entry, failed=True)
                return to_paybc(request, entry)
            return draft_page(request, entry, failed=False)
        return answer(request, entry)

    def answer(request: Request, entry: dict[str, Any]) -> Response:
        number = entry["incorporation_number"]
        if not state.decided(entry):
            # File and Pay saved and paid the filing: the dashboard of the temporary
            # registration; the BC number comes when the registry completes it
            return show("Business Dashboard", (
                f'<dl><dt>Temporary Registration</dt><dd id="temporary-number">'
                f'{entry["temporary_number"]}</dd><dt>Name</dt><dd id="legal-name">'
                f'{esc(entry["legal_name"])}</dd><dt>Status</dt><dd id="filing-status">PAID'
                "</dd></dl><p>Your filing has been received and is being processed by the "
                "Registry.</p>"))
        return show("Incorporation Complete", (
            f'<dl><dt>Incorporation Number</dt><dd id="incorporation-number">{number}</dd>'
            f'<dt>Legal Name</dt><dd id="legal-name">{esc(entry["legal_name"])}</dd>'
            f'<dt>Status</dt><dd id="filing-status">COMPLETED</dd></dl><p><a id="certificate" '
            f'href="{url(request, f"/inc/certificate/{number}.pdf")}">Certificate of '
            "Incorporation (PDF)</a></p>"))

    @guard
    async def certificate(request: Request) -> Response:
        number = request.path_params["number"]
        entry = next((e for e in reg.entries("incorporation")
                      if e["incorporation_number"] == number), None)
        if entry is None or entry["status"] not in ("PAID", "COMPLETED") or not state.decided(
                entry):
            return show("Not found", "<p>No such certificate.</p>", status=404)
        pdf = make_pdf([bc.BRAND, "Certificate of Incorporation", f"Date: {bc.today()}"], [
            f"I hereby certify that {entry['legal_name']} was incorporated under the Business "
            f"Corporations Act on {entry['filed_on']}.",
            f"Incorporation Number: {number}", "Registrar of Companies, Province of British "
            "Columbia"], title="Certificate of Incorporation", author=bc.BRAND, paper="Letter")
        return pdf_response(pdf, f"{number}.pdf", inline=True)

    return [Route("/inc", start, methods=["GET", "POST"]),
            Route("/inc/step/{n:int}", step, methods=["GET", "POST"]),
            Route("/inc/people", add, methods=["POST"]),
            Route("/inc/shares", add, methods=["POST"]),
            Route("/inc/certificate/{number}.pdf", certificate),
            Route("/dashboard/{temp}", dashboard),
            Route("/dashboard/{temp}/pay", dashboard, methods=["POST"]),
            Route("/paybc/makepayment/{token}/{back:path}", paybc, methods=["GET", "POST"])]
