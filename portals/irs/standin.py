"""IRS EIN application stand-in: a single-page app at ``/applyein/``.

Follows ``docs/portals/irs.md`` and its facts extract
``tests/facts/irs-applyein.txt`` (checked by
``tests/browser/test_irs_standin.py``). The texts are :mod:`portals.irs.standin_texts`, the
client :mod:`portals.irs.standin_spa`.

    GET  /applyein/<route>         the app (one document for every route; steps change by
                                   history.pushState, answers render inline)
    POST /applyein/api/session     "Begin Application Now": a new session (15 min idle)
    POST /applyein/api/eligibility Identity's Continue: the TIN check, the daily limit (114)
    POST /applyein/api/application "Submit EIN Request": the EIN and its letter (base64 PDF)
    POST /applyein/api/keepalive   the idle modal's answer

Answers carry the real statuses and reference numbers (§4); the app maps them to its
texts. Out of hours and in maintenance the API answers 503 and the app shows
``serviceUnavailable`` (the real out-of-hours page is not known [?]). Faults: ``error_code``
is ``[identity:|submit:]<status>/<ref>`` (e.g. ``identity:401/115``, ``429/101``), a bare
reference number (its page and status as in §4), ``SameTinDeceased``/``SameTinProtected``,
or a bare 5xx; ``processing_ms`` (the submission's answer time; may exceed
``app_timeout_ms``, the app's own 90 s); ``idle_ms`` (the idle modal; the countdown is
half of it, the real 10 + 5 min by default). Every accepted application is in the ledger
with a SHA-256 of the SSN/ITIN, never the number.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import random
import re
from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from portalq.jobs import clock
from portalq.portals.calendar import zone
from portalq.portals.irs import standin_texts as tx
from portalq.portals.irs.standin_spa import APP_JS
from portalq.portals.standin.kit.control import dialog_script
from portalq.portals.standin.kit.html import delay, esc, layout, root
from portalq.portals.standin.kit.pdf import make_pdf
from portalq.portals.standin.kit.session import Sessions
from portalq.portals.standin.kit.state import PortalState, drop_connection

TITLE = "Apply For Ein"
IRS_TZ = zone("America/New_York")
STATES = ("AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE "
          "NV NH NJ NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY").split()
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
#: the business categories' values (tests/facts/irs-bundle-controls.txt §7; their texts are
#: not captured)
CATEGORIES = ["ACCOMMODATIONS", "CONSTRUCTION", "FINANCE", "FOOD_SERVICE", "HEALTH_CARE",
              "INSURANCE", "MANUFACTURING", "REAL_ESTATE", "RENTAL_LEASING", "RETAIL",
              "SOCIAL_ASSISTANCE", "TRANSPORTATION", "WHOLESALE", "OTHER"]
EIN_PREFIXES = ["20", "26", "27", "45", "46", "47", "81", "82", "83", "84", "85", "86", "87",
                "88", "92", "93", "98", "99"]
LETTER_TYPE = "CP575A"  # [?] the extract has the download name "{letterType}.pdf" only
APP_TIMEOUT_MS = 90_000  # §4: the app's own request timeout
IDLE_MS = 600_000        # §8: 10 min idle -> the modal, then 5 min -> sessionExpired
IDENTITY_REFS = {"102", "105", "115", "SameTinDeceased", "SameTinProtected"}
STATUS_OF = {"identity": {"101": 401, "102": 401, "105": 429, "112": 400, "114": 429,
                          "115": 401, "SameTinDeceased": 400, "SameTinProtected": 400},
             "submit": {"101": 429, "103": 401, "112": 401, "114": 429}}

_CSS = """body{font:15px sans-serif;margin:0;color:#1b1b1b}header{background:#0b2a4a;color:#fff;
padding:8px 16px}main{padding:16px;max-width:780px}.sr-only{position:absolute;width:1px;height:1px;
overflow:hidden;clip:rect(0 0 0 0)}ol.stepIndicator-flexWrap{display:flex;gap:12px;padding:0;
list-style:none}.stepIndicator-title-active{font-weight:bold}.radio input{position:absolute;
opacity:0;pointer-events:none}.radio label{display:inline-block;border:1px solid #888;
padding:4px 8px;margin:2px;cursor:pointer}.radio input:checked+label{background:#cde}
fieldset{border:0;padding:0;
margin:8px 0}.field label{display:block;margin-top:6px}.sectionAlert--error{border-left:6px solid
#b50909;padding:4px 12px}.btn{display:inline-block;background:#005ea2;color:#fff;padding:6px 16px;
margin:12px 8px 0 0;text-decoration:none;border:0}[role=dialog]{position:fixed;top:30%;left:30%;
background:#fff;border:2px solid #000;padding:16px}"""


def _texts() -> dict[str, Any]:
    return {"routes": tx.ROUTES, "steps": tx.STEP_LABELS, "alerts": tx.ALERTS,
            "structures": tx.STRUCTURES, "subTypes": tx.SUB_TYPES, "reasons": tx.REASONS,
            "fields": tx.FIELD_NAMES, "suffixes": tx.SUFFIXES, "roleYes": tx.ROLE_YES,
            "roleNo": tx.ROLE_NO,
            "llcMembers": tx.LLC_MEMBERS, "confirmError": tx.CONFIRM_ERROR,
            "letterDigital": tx.LETTER_DIGITAL, "letterMail": tx.LETTER_MAIL,
            "letterRequired": tx.LETTER_REQUIRED, "submit": tx.SUBMIT,
            "submitInstructions": tx.SUBMIT_INSTRUCTIONS, "cancelAria": tx.CANCEL_ARIA,
            "congratulations": tx.CONGRATULATIONS, "savePrint": tx.SAVE_PRINT,
            "digitalNote": tx.DIGITAL_NOTE, "mailNote": tx.MAIL_NOTE,
            "mailNoteDesignee": tx.MAIL_NOTE_DESIGNEE, "download": tx.DOWNLOAD,
            "moreTime": tx.MORE_TIME, "expiresIn": tx.EXPIRES_IN}


def signin_look(title: str, body: str, status: int = 200) -> Response:
    """How this portal draws its sign-in pages (see :mod:`portals.standin.kit.sign_in_gate`)."""
    return layout(TITLE, f"<h1>{esc(title)}</h1>{body}", status=status)


def _fault(state: PortalState, place: str) -> tuple[int, str] | None:
    """The injected answer due at ``place`` ("identity" | "submit"): (status, ref)."""
    code = state.faults.error_code
    if not code or state.faults.error_times == 0:
        return None
    where, _, spec = code.rpartition(":")
    where = where or ("identity" if spec in IDENTITY_REFS else "submit")
    if where != place or state.take_error() is None:
        return None
    if "/" in spec:
        status, ref = spec.split("/", 1)
        return int(status), ref
    if spec.isdigit() and int(spec) >= 500:
        return int(spec), ""
    return STATUS_OF[place].get(spec, 401), spec


def _answer(status: int, ref: str = "") -> JSONResponse:
    return JSONResponse({"ref": ref} if ref else {}, status_code=status)


def _name_control(legal_name: str) -> str:
    return re.sub(r"[^A-Z0-9&-]", "", legal_name.upper().removeprefix("THE "))[:4]


def _letter(entry: dict[str, Any]) -> str:
    pdf = make_pdf(
        ["Department of the Treasury", "Internal Revenue Service", "Notice CP 575"],
        [f"Date of this notice: {entry['at'][:10]}", "", entry["legal_name"], *entry["address"],
         "", "WE ASSIGNED YOU AN EMPLOYER IDENTIFICATION NUMBER",
         f"Employer Identification Number: {entry['ein']}",
         f"Name control: {entry['name_control']}",
         "Thank you for applying for an Employer Identification Number (EIN). We assigned you "
         "the EIN above. Please keep this notice in your permanent records.",
         f"Responsible party: {entry['responsible_name']}"])
    return base64.b64encode(pdf).decode()


def _renamed(texts: Any, renamed: dict[str, str]) -> Any:
    """``texts`` with every string equal to a key of ``renamed`` replaced (the fault)."""
    if isinstance(texts, dict):
        return {k: _renamed(v, renamed) for k, v in texts.items()}
    if isinstance(texts, list):
        return [_renamed(v, renamed) for v in texts]
    return renamed.get(texts, texts) if isinstance(texts, str) else texts


def create_app(state: PortalState) -> Starlette:
    sessions = Sessions(state, "irs_session", timedelta(minutes=15))

    def down() -> bool:
        return state.faults.maintenance or not state.is_open()

    async def shell(request: Request) -> Response:
        await delay(state)
        base = f"{root(request)}/applyein"
        idle = state.faults.idle_ms or IDLE_MS
        config = {"base": base, "texts": _renamed(_texts(), state.faults.renamed_text or {}),
                  "states": STATES, "months": MONTHS,
                  "categories": CATEGORIES, "changedSelector": state.faults.changed_selector,
                  "reviewChanged": state.faults.review_changed,
                  "appTimeoutMs": state.faults.app_timeout_ms or APP_TIMEOUT_MS,
                  "idleMs": idle, "countdownMs": idle // 2}
        boot = json.dumps(config).replace("</", "<\\/")
        doc = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{TITLE}</title>"
               f"<style>{_CSS}</style></head><body><header>IRS</header><main id=root></main>"
               f"<script>window.IRS = {boot};\n{dialog_script(state)}\n{APP_JS}</script>"
               "</body></html>")
        return HTMLResponse(doc)

    async def home(request: Request) -> Response:
        return RedirectResponse(f"{root(request)}/applyein/", status_code=302)

    async def begin(request: Request) -> Response:
        await delay(state)
        if down():
            return _answer(503)
        sid, _ = sessions.new(data={}, processing=False)
        response = JSONResponse({"sessionId": sid})
        sessions.attach(response, sid, f"{root(request)}/applyein")
        return response

    async def keepalive(request: Request) -> Response:
        session = sessions.current(request)
        if session is None:
            return _answer(401)
        session["keepalives"] = session.get("keepalives", 0) + 1
        return _answer(200)

    def same_party(ssn_hash: str) -> list[dict[str, Any]]:
        with state.lock:
            return [e for e in state.ledger if e["ssn_sha256"] == ssn_hash]

    def irs_day() -> str:
        return clock.now().astimezone(IRS_TZ).date().isoformat()

    async def eligibility(request: Request) -> Response:
        await delay(state)
        if down():
            return _answer(503)
        session = sessions.current(request)
        if session is None:
            return _answer(401)
        body = await request.json()
        if (fault := _fault(state, "identity")) is not None:
            return _answer(*fault)
        ssn = re.sub(r"\D", "", str(body.get("ssn", "")))
        if len(ssn) != 9 or ssn[:3] in ("000", "666"):  # the live TIN/name match fails
            return _answer(401, "102")
        ssn_hash = hashlib.sha256(ssn.encode()).hexdigest()
        if any(e["irs_day"] == irs_day() for e in same_party(ssn_hash)):
            return _answer(429, "114")
        session.update(ssn=ssn, steps=session["steps"] + 1)
        return JSONResponse({"eligibilityToken": hashlib.sha256(
            f"{ssn_hash}{random.random()}".encode()).hexdigest()[:24]})

    async def application(request: Request) -> Response:
        await delay(state)
        if down():
            return _answer(503)
        session = sessions.current(request)
        if session is None or "ssn" not in session:
            return _answer(401)
        if session["processing"]:  # a second click while the first is being processed
            return _answer(403, "101")
        if (fault := _fault(state, "submit")) is not None:
            return _answer(*fault)
        d = (await request.json()).get("data", {})
        if state.faults.review_changed == "field" and not d.get("signatureAuthorityInput"):
            return _answer(400)   # the redesigned application's required question unanswered
        ssn_hash = hashlib.sha256(session["ssn"].encode()).hexdigest()
        name_key = re.sub(r"\W+", " ", d.get("legalNameInput", "")).strip().upper()
        earlier = same_party(ssn_hash)
        if any(e["irs_day"] == irs_day() for e in earlier):
            return _answer(429, "114")
        if any(e["name_key"] == name_key for e in earlier):
            return _answer(429, "101")  # this party already has an EIN for this entity
        if state.faults.drop_before_submit:
            return drop_connection(request)
        entry = record(d, ssn_hash, name_key)
        session["processing"] = True
        try:
            await state.hang_if_asked()
            if state.faults.processing_ms:
                await asyncio.sleep(state.faults.processing_ms / 1000)
        finally:
            session["processing"] = False
        if state.faults.drop_after_submit:
            return drop_connection(request)
        letter = None
        if entry["letter"] == "DIGITAL":
            letter = {"content": _letter(entry), "letterType": LETTER_TYPE}
        return JSONResponse({"einResult": {
            "ein": entry["ein"], "legalName": entry["legal_name"],
            "nameControl": entry["name_control"], "confirmationLetter": letter}})

    def record(d: dict[str, Any], ssn_hash: str, name_key: str) -> dict[str, Any]:
        with state.lock:
            seq = len(state.ledger) + 1
        ein = f"{random.choice(EIN_PREFIXES)}-{(1_234_567 + seq * 7_919) % 10_000_000:07d}"
        tpd = {k[4:]: v for k, v in d.items() if k.startswith("tpd.")}
        designee = " ".join(filter(None, (tpd.get("responsibleFirstName"),
                                          tpd.get("responsibleMiddleName"),
                                          tpd.get("responsibleLastName")))) \
            if d.get("entityRoleRadioInput") == "no" else None
        sub_name = tx.SUB_TYPES.get(str(d.get("legalStructureInput")), ("", {}))[0]
        return state.record({
            "ein": ein, "legal_name": d.get("legalNameInput", ""), "name_key": name_key,
            "name_control": _name_control(d.get("legalNameInput", "")),
            "ssn_sha256": ssn_hash, "irs_day": irs_day(),
            "legal_structure": d.get("legalStructureInput"),
            "sub_type": d.get(sub_name) or None,
            "responsible_name": f'{d.get("responsibleFirstName")} {d.get("responsibleLastName")}',
            "address": [d.get("physicalStreet", ""), f'{d.get("physicalCity")}, '
                        f'{d.get("physicalState")} {d.get("physicalZipCode")}'],
            "designee": designee and {
                "name": designee, "address": f'{tpd.get("physicalStreet")}, '
                f'{tpd.get("physicalCity")}, {tpd.get("physicalState")} '
                f'{tpd.get("physicalZipCode")}',
                # the real Third Party page has no fax field
                "phone": tpd.get("thePhone"), "fax": None},
            # the real app sends letterDelivery "MAIL" for a designee's application
            "letter": "MAIL" if designee else d.get("confirmationLetterRadioInput"),
        })

    return Starlette(routes=[
        Route("/", home),
        Route("/applyein/api/session", begin, methods=["POST"]),
        Route("/applyein/api/eligibility", eligibility, methods=["POST"]),
        Route("/applyein/api/application", application, methods=["POST"]),
        Route("/applyein/api/keepalive", keepalive, methods=["POST"]),
        Route("/applyein", shell),
        Route("/applyein/{route:path}", shell),
    ])
