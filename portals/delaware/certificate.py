"""The certificate a Delaware filing uploads: built from the payload as a small valid PDF.

eCorp2 takes no per-field entity form: the signed certificate itself is uploaded as a PDF
(docs/portals/delaware.md, source D1). A business may supply its own signed PDF
(``portalq enqueue ... --document``); otherwise the flow builds one here.

The PDF itself: :mod:`.pdfdoc` (no PDF library in the base install).
"""

from __future__ import annotations

from portalq.jobs.errors import BusinessError
from portalq.portals.entity.payload import FileEntityPayload
from portalq.portals.flows.pdfdoc import make_pdf
from portalq.portals.payloads import Person

#: Delaware's name rules (8 Del. C. 102(a)(1), 6 Del. C. 18-102): checked before anything
#: is uploaded, so a name the Division must refuse is never filed nor paid
ENDINGS = {"LLC": ("LLC", "L.L.C.", "Limited Liability Company"),
           "CORPORATION": ("Inc.", "Inc", "Incorporated", "Corporation", "Corp.", "Corp",
                           "Company", "Co.", "Limited", "Ltd.", "Ltd")}
KINDS = {"LLC": "Certificate of Formation", "CORPORATION": "Certificate of Incorporation"}


def person_name(person: Person) -> str:
    return " ".join(filter(None, [person.first_name, person.middle_name, person.last_name]))


def document_type(p: FileEntityPayload) -> str:
    """The words typed in eCorp2's free-text "document type" field."""
    if p.entity_type not in KINDS:
        raise BusinessError(f"entity type {p.entity_type} cannot be filed in Delaware")
    return KINDS[p.entity_type]


def check_name(p: FileEntityPayload) -> None:
    if not p.legal_name:
        raise BusinessError("a Delaware filing needs the entity's legal name")
    if not p.legal_name.rstrip().endswith(ENDINGS[p.entity_type]):
        kind = "limited liability company" if p.entity_type == "LLC" else "corporation"
        raise BusinessError(f"Delaware: the name of a {kind} must end with a designator "
                            f"such as {ENDINGS[p.entity_type][0]} ({p.legal_name!r})")


def certificate_lines(p: FileEntityPayload) -> tuple[list[str], list[str]]:
    """(heading, body) of the certificate, from the payload."""
    check_name(p)
    llc = p.entity_type == "LLC"
    office = p.registered_office
    signer = (p.incorporators[0] if not llc and p.incorporators else p.completing_party)
    body = [f"FIRST: The name of the {'limited liability company' if llc else 'corporation'}"
            f" is {p.legal_name}.",
            f"SECOND: The address of its registered office in the State of Delaware is "
            f"{office.street}, {office.city}, {office.region} {office.postal_code}. The name "
            f"of its registered agent at such address is {p.registered_agent}."]
    if not llc:
        stock = "; ".join(f"{c.name}: {c.max_shares or ''}".strip(" :") for c in p.share_classes)
        body.append(f"THIRD: The corporation is authorized to issue: {stock}.")
    role = "Authorized Person" if llc else "Incorporator"
    body += ["IN WITNESS WHEREOF, the undersigned has executed this Certificate.",
             f"{role}: /s/ {person_name(signer)}"]
    return ["STATE OF DELAWARE", document_type(p).upper()], body


def certificate_pdf(p: FileEntityPayload) -> tuple[str, bytes]:
    """(file name, PDF) of the certificate built from ``p``."""
    heading, body = certificate_lines(p)
    kind = document_type(p)
    return f"{kind.replace(' ', '_')}.pdf", make_pdf(heading, body, title=f"{kind}: {p.legal_name}")
