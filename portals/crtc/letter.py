"""The CRTC registration letter, built from the payload as a PDF (:mod:`.pdfdoc`).

What a registration letter says (CRTC "Registering and Reporting to the CRTC",
http://www.crtc.gc.ca/eng/8180/8180e.htm, in ``docs/portals/crtc.md`` and its facts copy
``tests/facts/gckey-crtc.txt`` [R3]): facilities-based or not, the registration
list(s), the legal name and address, and the acknowledgement of the obligations. The list
names are the CRTC's own [R2]. The layout and the salutation are not sourced.
"""

from __future__ import annotations

from portalq.jobs import clock
from portalq.jobs.errors import BusinessError
from portalq.portals.crtc.payload import ProcessCrtcPayload
from portalq.portals.flows.pdfdoc import make_pdf

#: the payload's services that name one list each; the others need ``registration_lists``
LIST_OF_SERVICE = {"reseller": "Reseller of Telecommunications Services",
                   "internet": "Reseller of High-Speed Retail Internet Services"}
NAME = "registration-letter.pdf"


def lists(p: ProcessCrtcPayload) -> list[str]:
    chosen: list[str] = list(p.registration_lists) or list(dict.fromkeys(
        LIST_OF_SERVICE[s] for s in p.services if s in LIST_OF_SERVICE))
    if not chosen:
        raise BusinessError("crtc: the registration letter names no registration list (set "
                            "registration_lists: e.g. 'Reseller of Telecommunications "
                            "Services')")
    return chosen


def letter_pdf(p: ProcessCrtcPayload) -> bytes:
    names = lists(p)
    where = (f"{p.address.street}, {p.address.city}, {p.address.region} "
             f"{p.address.postal_code}, {p.address.country}" if p.address else None)
    kind = "facilities-based" if p.facilities_based else "non-facilities-based"
    body = [f"Date: {clock.now().date().isoformat()}",
            "Secretary General, Canadian Radio-television and Telecommunications Commission",
            f"Legal name: {p.company_name}"
            + (f" (incorporation number {p.incorporation_number}, {p.province})"
               if p.incorporation_number else f" ({p.province})"),
            *([f"Address: {where}"] if where else []),
            f"{p.company_name} is a {kind} provider and registers on the following "
            f"registration list(s): {'; '.join(names)}.",
            p.letter_text,
            f"{p.company_name} acknowledges the obligations that apply to the registration "
            "list(s) above.",
            f"Contact: {p.contact.name}, {p.contact.email}, {p.contact.phone}"]
    return make_pdf(["Registration as a telecommunications service provider"], body,
                    title=f"Registration letter: {p.company_name}")
