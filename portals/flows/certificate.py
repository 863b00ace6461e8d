"""The certificate a Delaware filing uploads: built from the payload as a small valid PDF.

eCorp2 takes no per-field entity form: the signed certificate itself is uploaded as a PDF
(``../shared/portals/delaware.txt``). A business may supply its own signed PDF
(``portalq enqueue ... --document``); otherwise the flow builds one here.

Why a hand-written PDF and not fpdf2: fpdf2 is in the ``demo`` extra only (the stand-ins'
PDFs); the flows run from the base install, which has no PDF library. One page of
Helvetica text needs only five objects and a cross-reference table (PDF 1.4, 7.5), written
uncompressed so anyone can read what was filed.
"""

from __future__ import annotations

from collections.abc import Sequence

from portalq.jobs.errors import BusinessError
from portalq.portals.payloads import FileEntityPayload, Person

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


def _escape(text: str) -> bytes:
    raw = text.encode("latin-1", "replace")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _wrap(text: str, width: int = 88) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


def make_pdf(heading: Sequence[str], body: Sequence[str], *, title: str) -> bytes:
    """One US-letter page: ``heading`` in bold, then ``body`` paragraphs (latin-1 text)."""
    ops = [b"BT", b"/F2 13 Tf", b"72 720 Td", b"16 TL"]
    ops += [b"(" + _escape(h) + b") '" for h in heading]
    ops += [b"/F1 10 Tf", b"13 TL", b"T*"]
    for paragraph in body:
        ops += [b"(" + _escape(line) + b") '" for line in _wrap(paragraph)]
        ops.append(b"T*")
    ops.append(b"ET")
    content = b"\n".join(ops)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R /F2 6 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold "
        b"/Encoding /WinAnsiEncoding >>",
        b"<< /Title (" + _escape(title) + b") /Producer (portalq) >>",
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += (b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n"
            % (len(objects) + 1, len(objects), xref))
    return bytes(out)


def certificate_pdf(p: FileEntityPayload) -> tuple[str, bytes]:
    """(file name, PDF) of the certificate built from ``p``."""
    heading, body = certificate_lines(p)
    kind = document_type(p)
    return f"{kind.replace(' ', '_')}.pdf", make_pdf(heading, body, title=f"{kind}: {p.legal_name}")
