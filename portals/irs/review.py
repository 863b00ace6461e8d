"""The check before "Submit EIN Request": the review page must be the one the flow knows —
its structure (row labels, questions, fields, buttons; the data left out) and the values
the flow filled. Any difference: nothing is submitted -- another structure is a changed
portal (:class:`ReviewChanged`, which pauses the portal), other values this job's trouble
(:class:`ReviewValuesDiffer`)."""

from __future__ import annotations

import calendar
import json
from typing import TYPE_CHECKING, Any

from portalq.jobs.errors import BusinessError, PortalChanged
from portalq.portals.irs.payload import ObtainEinPayload

if TYPE_CHECKING:
    from playwright.async_api import Page

#: the page's structure, data left out: what the flow expects (designee row when it applies)
ROW_LABELS = ["Legal structure", "Reason for applying", "Responsible party", "SSN/ITIN",
              "Physical address", "Phone number", "Legal name", "Start date",
              "Principal activity"]
GROUPS = ["Confirmation Letter"]
FIELDS = ["radio:confirmationLetterRadioInput", "radio:confirmationLetterRadioInput"]
BUTTONS = ["Back", "Submit EIN Request"]
# the labels the pages give a payload's choices: the form (irs.py) and its review show them
#: payload -> (structure label, sub-type label)  (facts §9)
STRUCTURES = {"LLC": ("Limited Liability Company (LLC)", None),
              "CORPORATION": ("Corporations", "Corporation"),
              "PARTNERSHIP": ("Partnerships", "Partnership"),
              "SOLE_PROPRIETOR": ("Sole Proprietor", None)}
REASONS = {"NEW_BUSINESS": "Started a new business", "HIRED_EMPLOYEES": "Hired employee(s)",
           "BANKING_NEEDS": "Banking purposes",
           "CHANGING_LEGAL_STRUCTURE": "Changed type of organization",
           "PURCHASED_BUSINESS": "Purchased active business"}

_SHAPE_JS = """() => {
  const main = document.querySelector('main') || document.body;
  const txt = (n) => n.innerText.trim().replace(/\\s+/g, ' ');
  return {rows: [...main.querySelectorAll('dl.review dt')].map((dt) => [txt(dt),
            dt.nextElementSibling ? txt(dt.nextElementSibling) : '']),
          groups: [...main.querySelectorAll('form fieldset legend')].map(txt),
          fields: [...main.querySelectorAll('form input, form select, form textarea')]
            .map((i) => `${i.type || i.tagName.toLowerCase()}:${i.name || i.id}`),
          buttons: [...main.querySelectorAll('button, a[role=button]')]
            .map((b) => b.getAttribute('aria-label') || txt(b))};
}"""


class ReviewChanged(PortalChanged):
    """The review page's structure is not the one the flow knows (a label renamed, a field
    added): nothing was submitted; the portal is paused until an operator resumes it."""


class ReviewValuesDiffer(BusinessError):
    """The review page is the known one but shows other values than the flow filled:
    nothing was submitted; this job needs a person (the portal is not paused)."""


def expected_snapshot(known: dict[str, list[str]]) -> str:
    """The review page the flow expects, in the aria snapshot's terms (data left out)."""
    lines = ["# structure: " + json.dumps(known)]
    for label in known["labels"]:
        lines += [f"- term: {label}", "- definition: (data)"]
    for group in known["groups"]:
        lines.append(f'- group "{group}":')
        lines += [f"  - radio  # {f}" for f in known["fields"] if f.startswith("radio:")]
    lines += [f'- button "{b}"' for b in known["buttons"]]
    return "\n".join(lines)


def expected(p: ObtainEinPayload) -> dict[str, Any]:
    rp, a = p.responsible_party, p.address
    structure, sub_type = STRUCTURES[p.legal_structure]
    digits = "".join(c for c in rp.tax_id() if c.isdigit())
    values = {
        "Legal structure": f"{structure}: {sub_type}" if sub_type else structure,
        "Reason for applying": REASONS[p.reason],
        "Responsible party": " ".join(filter(None, [rp.first_name, rp.middle_name,
                                                    rp.last_name, rp.suffix])),
        "SSN/ITIN": f"XXX-XX-{digits[-4:]}",
        "Physical address": f"{a.street}, {a.city}, {a.region} {a.postal_code}",
        "Phone number": p.phone, "Legal name": p.legal_name,
        "Start date": f"{calendar.month_name[p.start_month]} {p.start_year}",
        "Principal activity": p.principal_activity}
    if p.third_party_designee is not None:
        values["Third party designee"] = p.third_party_designee.name
    return {"labels": list(values), "values": values}


async def check_review(page: Page, p: ObtainEinPayload) -> None:
    seen = await page.evaluate(_SHAPE_JS)
    want = expected(p)
    shape = {"labels": [k for k, _ in seen["rows"]], "groups": seen["groups"],
             "fields": seen["fields"], "buttons": seen["buttons"]}
    # the letter choice is rendered only when the responsible party applies in person
    # (tests/facts/irs-ein-assignment.txt §5)
    letter = p.third_party_designee is None
    known = {"labels": want["labels"], "groups": GROUPS if letter else [],
             "fields": FIELDS if letter else [], "buttons": BUTTONS}
    if shape != known:
        diff = {k: {"expected": known[k], "page": shape[k]} for k in known
                if known[k] != shape[k]}
        raise ReviewChanged(f"IRS review page differs from the expected one, nothing "
                            f"submitted — portal changed? ({diff})", where="the review",
                            expected=expected_snapshot(known))
    values = dict(seen["rows"])
    wrong = [k for k, v in want["values"].items() if values.get(k) != v]
    if wrong:
        raise ReviewValuesDiffer(f"IRS review page shows other values than the flow filled for "
                            f"{', '.join(wrong)}; nothing submitted")
