"""The BC Registries stand-in's records and rules (see :mod:`.bc`): the registry's
constants, queries over the ledger (:class:`Registry`), the name examiner (:func:`examine`)
and the checks of a Name Request used for an incorporation (:func:`nr_problem`)."""

from __future__ import annotations

import hashlib
import re
import secrets
import string
from datetime import date
from typing import Any

from portalq.jobs import clock
from portalq.portals.calendar import PortalCalendar, is_open, parse_hours, zone
from portalq.portals.standin.kit.state import PortalState

BRAND = "BC Registries and Online Services"
HOURS = ("Hours: Monday to Saturday 6:00 a.m. to 10:00 p.m., Sunday 1:00 p.m. to "
         "10:00 p.m. Pacific Time.")
TZ = zone("America/Vancouver")
RESERVATION_DAYS = 56
NR_FEE, FEES = "$30.00", {"BC": "$350.00", "ULC": "$1,000.00"}
ENTITY_LABELS = {"BC": "BC Limited Company", "ULC": "BC Unlimited Liability Company"}
RESTRICTED = {"ROYAL", "CROWN", "PARLIAMENT", "GOVERNMENT", "POLICE", "RCMP", "UNIVERSITY",
              "OLYMPIC"}
CONSENT_WORDS = {"BANK", "BANKING", "TRUST", "TRUSTS"}
DESIGNATIONS = {"BC": ("LTD.", "LIMITED", "INC.", "INCORPORATED", "CORP.", "CORPORATION"),
                "ULC": ("ULC", "UNLIMITED LIABILITY COMPANY")}
STEPS = ("Define Your Company", "Add People and Roles", "Create Share Structure",
         "Incorporation Agreement", "Review and Confirm")
ROLES = {"completing_party": "Completing Party", "incorporator": "Incorporator",
         "director": "Director"}
#: the incorporation agreement choices, as record-book statements [S: business-create-ui]
AGREEMENTS = {
    "sample": "The sample Incorporation Agreement and Table 1 Articles has been completed and "
              "a copy has been added to the company's record book.",
    "custom": "The custom Incorporation Agreement and custom Articles has been completed and a "
              "copy has been added to the company's record book."}
#: the review page's Completing Party Statement, shown as text [S]
COMPLETING_PARTY_STATEMENT = (
    "An original signature has been placed on each of those signature lines,",
    "I have no reason to believe that the signature placed on a signature line is not the "
    "signature of the person whose name is set out under that signature line, and",
    "I have relevant knowledge of the company and that I am authorized to make this filing.",
)
#: the one Certify section's checkbox: its words are not in the sources [?]
CERTIFY = "I certify the Completing Party Statement above."
#: an NR's state CONDITIONAL shows its name's choice state CONDITION [S: name-choice states]
CHOICE_STATE = {"APPROVED": "APPROVED", "CONDITIONAL": "CONDITION", "REJECTED": "REJECTED"}


#: PayBC keeps shorter hours than the registry (Pacific) [S]
PAYBC = PortalCalendar(code="paybc", timezone="America/Vancouver", windows=parse_hours(
    "Mon-Fri 06:00-21:00; Sat 00:00-19:00; Sun 12:00-24:00"))
PAYMENT_ERROR = ("We are unable to process your payment at this time. This Incorporation "
                 "Application has been saved as a DRAFT and you can retry your payment from "
                 "your Business Dashboard at a later time.")
PAYBC_HOURS = ("PayBC is normally available: Monday to Friday: 6:00am to 9:00pm / Saturday: "
               "12:00am to 7:00pm / Sunday: 12:00pm to 12:00am")


def paybc_up(state: PortalState) -> bool:
    """Can PayBC take a payment now? Its own hours when the stand-in keeps the calendar."""
    if state.faults.payment_down:
        return False
    return state.faults.hours != "calendar" or is_open(PAYBC, clock.now())


def temporary_number() -> str:
    """A temporary registration's identifier as bcgov/lear makes it (legal-api
    src/legal_api/services/bootstrap.py, ``_generate_temp_identifier``): "T" and 9 letters
    (either case) or digits, at least one a digit."""
    alphabet = string.ascii_letters + string.digits
    while True:
        rest = "".join(secrets.choice(alphabet) for _ in range(9))
        if any(c.isdigit() for c in rest):
            return "T" + rest


def today() -> date:
    return clock.now().astimezone(TZ).date()


def contact_key(contact: str) -> str:
    text = contact.strip().lower()
    norm = text if "@" in text else re.sub(r"\D", "", text)[-10:]
    return hashlib.sha256(norm.encode()).hexdigest()[:16] if norm else ""


def norm_nr(text: str) -> str:
    """An NR number as namex reads it: ``NR 1234567``, or a temporary ``NR L123456``."""
    match = re.fullmatch(r"\s*(?:NR)?\s*(L?)\s*(\d{6,7})\s*", (text or "").upper())
    if match is None or len(match[2]) != (6 if match[1] else 7):
        return ""
    return f"NR {match[1]}{match[2]}"


def norm_name(name: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", name.upper()).split())


class Registry:
    """Queries over the ledger (the registry's records)."""

    def __init__(self, state: PortalState) -> None:
        self.state = state

    def entries(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in list(self.state.ledger) if e.get("kind") == kind]

    def nr(self, number: str) -> dict[str, Any] | None:
        number = norm_nr(number)
        return next((e for e in self.entries("name_request") if e["nr_number"] == number), None)

    def nr_state(self, entry: dict[str, Any]) -> str:
        """The NR's namex state now: PENDING_PAYMENT until paid; paid into DRAFT, it waits
        for the examiners in order of receipt (held: HOLD; namex updating its legacy
        record: NRO_UPDATING); then the examiners' decision, EXPIRED or CONSUMED."""
        stored = entry["namex_state"]
        if stored == "PENDING_PAYMENT":
            return str(stored)
        if stored == "DRAFT":
            if not self.state.decided(entry):
                return "DRAFT"
            held = {"hold": "HOLD", "nro_updating": "NRO_UPDATING"}
            if entry.get("staff_outcome") in held:
                return held[entry["staff_outcome"]]
        if any(f.get("nr_number") == entry["nr_number"] for f in self.entries("incorporation")):
            return "CONSUMED"
        if entry["state"] in ("APPROVED", "CONDITIONAL") and today() > date.fromisoformat(
                entry["expires_on"]):
            return "EXPIRED"
        return str(entry["state"])

    def names_in_use(self) -> set[str]:
        used = {norm_name(f["legal_name"]) for f in self.entries("incorporation")}
        used |= {norm_name(e["approved_name"]) for e in self.entries("name_request")
                 if self.nr_state(e) in ("APPROVED", "CONDITIONAL")}
        return used

    def unique(self, make: Any, kind: str, key: str) -> str:
        taken = {e[key] for e in self.entries(kind)}
        while (value := make()) in taken:
            pass
        return str(value)


def examine(names: list[str], entity: str, in_use: set[str]) -> list[tuple[str, str, str]]:
    """(name, decision, reason) per name, in order; the registry examiner's rules."""
    out = []
    for name in names:
        norm = norm_name(name)
        words = set(norm.split())
        if not any(norm.endswith(norm_name(d)) for d in DESIGNATIONS[entity]):
            name = f"{name} {DESIGNATIONS[entity][0].title() if entity == 'BC' else 'ULC'}"
            norm = norm_name(name)
        if words & RESTRICTED:
            out.append((name, "REJECTED", f"restricted word: {sorted(words & RESTRICTED)[0]}"))
        elif norm in in_use:
            out.append((name, "REJECTED", "conflicts with an existing name"))
        elif words & CONSENT_WORDS:
            out.append((name, "CONDITIONAL", "consent letter required"))
        else:
            out.append((name, "APPROVED", ""))
    return out


def nr_problem(reg: Registry, number: str, entity: str, consent: bool) -> tuple[str, str] | None:
    """Why an NR cannot be used for this incorporation, as (code, message), or None."""
    entry = reg.nr(number)
    label = norm_nr(number) or number
    if entry is None:
        return "NR_NOT_FOUND", f"Name Request {label} was not found."
    status = reg.nr_state(entry)
    if status == "EXPIRED":
        return "NR_EXPIRED", f"Name Request {label} expired on {entry['expires_on']}."
    if status == "CONSUMED":
        return "NR_USED", f"Name Request {label} has already been used."
    if status == "REJECTED":
        return "NR_REJECTED", f"Name Request {label} was rejected."
    if status not in ("APPROVED", "CONDITIONAL"):   # Actions.vue: APPROVED or CONDITIONAL
        return "NR_NOT_APPROVED", f"Name Request {label} is not approved ({status})."
    if entry["entity_type"] != entity:
        held = ENTITY_LABELS[entry["entity_type"]]
        return "NR_TYPE_MISMATCH", (f"Name Request {label} is for a {held}; it cannot be used "
                                    f"for a {ENTITY_LABELS[entity]}.")
    if status == "CONDITIONAL" and not consent:
        return "NR_CONSENT_REQUIRED", (f"Name Request {label} is conditional: a consent letter "
                                       "is required.")
    return None


