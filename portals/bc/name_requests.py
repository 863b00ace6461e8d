"""What a retry of a BC ``name_search`` job does with its Name Request (NR), decided from
the job's checkpoints and its (possibly edited) payload alone -- no browser, so the flow
and the console's retry forms read the same answer.

An NR the registry has finished with (REJECTED, EXPIRED, CANCELLED, ...) can never name a
company. A retry with the SAME names re-reads it (never a second NR for names already
examined: the registry would refuse them again, for another fee). A retry with other names
retires it (kept in ``earlier_nrs``) and requests a NEW NR under a new reference. A name
already rejected in one of the job's NRs is never requested (nor paid for) again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from portalq.jobs.errors import PortalChanged


class Outcome(Enum):
    """What an NR's state means to a job."""

    PAY = "created, not paid: its payment is the next step (once)"
    WAIT = "not decided yet: the job waits on the registry"
    APPROVED = "the name is approved: it can name a company"
    CONDITIONAL = "approved on a condition: a consent letter first"
    REJECTED = "every name was rejected"
    FINISHED = "it can never name a company"


#: every state bcgov's sources know -- namex api/namex/models/state.py (State.ALL_STATES) and
#: namerequest app/src/enums/nr-state.ts (ASSUMED, REFUNDED) -- and what it means; the life
#: of an NR is in docs/portals/bc.md ("An NR's life")
OUTCOMES: dict[str, Outcome] = {
    # POST /namerequests creates it PENDING_PAYMENT (name_requests.py)
    "PENDING_PAYMENT": Outcome.PAY,
    # paid: PENDING_PAYMENT -> DRAFT, queued for examination (payment.py); an examiner has
    # it (INPROGRESS) or holds it (HOLD); NRO_UPDATING is namex's temporary state while the
    # legacy record is updated; RESERVED / COND-RESERVE become APPROVED / CONDITIONAL as
    # their payment completes (payment.py, complete_reservation_payment)
    **dict.fromkeys(("DRAFT", "INPROGRESS", "HOLD", "NRO_UPDATING", "RESERVED",
                     "COND-RESERVE"), Outcome.WAIT),
    "APPROVED": Outcome.APPROVED,
    "CONDITIONAL": Outcome.CONDITIONAL,
    "REJECTED": Outcome.REJECTED,
    **dict.fromkeys(("EXPIRED", "CONSUMED", "CANCELLED", "REFUND_REQUESTED", "REFUNDED",
                     "COMPLETED", "HISTORICAL", "ASSUMED"), Outcome.FINISHED),
}

#: NR states after which the NR can never name a company
FINISHED_STATES = frozenset(s for s, o in OUTCOMES.items()
                            if o in (Outcome.FINISHED, Outcome.REJECTED))
#: NR states that are not a decision yet: a job waits on them, never fails
WAITING_STATES = frozenset(s for s, o in OUTCOMES.items() if o is Outcome.WAIT)


def classify(state: str) -> Outcome:
    """What the NR state ``state`` means; one no source shows is a changed portal."""
    if state not in OUTCOMES:
        raise PortalChanged(f"bc_corporate_online: Name Request state {state!r} is not one "
                            "bcgov's namex knows — portal changed?", where="the NR state",
                            expected="one of " + ", ".join(sorted(OUTCOMES)))
    return OUTCOMES[state]


def norm(name: str) -> str:
    """A name as the comparison sees it: case, punctuation and spacing aside."""
    return " ".join(re.sub(r"[^\w\s]", " ", str(name).casefold()).split())


def _decided(nr: Mapping[str, Any]) -> list[Sequence[Any]]:
    return [d for d in nr.get("nr_decisions") or [] if len(d) >= 2]


def requested_names(nr: Mapping[str, Any]) -> list[str]:
    """The names an NR was requested for: as saved before it was requested, else as the
    registry's decisions name them."""
    names = nr.get("nr_for_names")
    if names:
        return [str(n) for n in names]
    return [str(d[0]) for d in _decided(nr)]


def _rejected(nrs: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """{normalised name: (the name, the NR that rejected it)} over ``nrs``."""
    out: dict[str, tuple[str, str]] = {}
    for nr in nrs:
        for d in _decided(nr):
            if str(d[1]) == "REJECTED":
                out[norm(str(d[0]))] = (str(d[0]), str(nr.get("nr_number")))
    return out


@dataclass(frozen=True)
class Plan:
    """``new``: the retry retires the finished NR and requests a new one; ``same``: the
    names are those of the finished NR (the retry reads it again); ``refused``: why a retry
    with these names cannot help (None: it may); ``says``: what a retry does, in a line."""

    new: bool
    refused: str | None
    says: str
    same: bool = False


def plan(payload: Mapping[str, Any], checkpoint: Mapping[str, Any] | None) -> Plan | None:
    """What a retry with ``payload`` does with the job's NR (None: it has no finished NR,
    so the retry is no different from the first attempt)."""
    cp = checkpoint or {}
    number, state = cp.get("nr_number"), cp.get("nr_state")
    if not number or state not in FINISHED_STATES:
        return None
    names = [str(n) for n in payload.get("names") or []]
    before = requested_names(cp)
    if [norm(n) for n in names] == [norm(n) for n in before]:
        return Plan(False, f"the names are unchanged: {number} stays {state}, a retry would "
                    "fail the same way; change the names (a new Name Request is made for "
                    "them) or cancel the job",
                    f"{number} is {state}. A retry with the same names reads it again and "
                    "fails the same way; edit the names and the retry makes a new Name "
                    "Request ($30) for the new names, under a new reference.", same=True)
    rejected = _rejected([*cp.get("earlier_nrs", []), cp])
    again = [rejected[norm(n)] for n in names if norm(n) in rejected]
    if again:
        listed = "; ".join(f"{n!r} in {nr}" for n, nr in again)
        return Plan(False, f"already rejected by the registry ({listed}): it is never "
                    "requested again; choose another name", "")
    return Plan(True, None, f"{number} is {state}: the retry makes a new Name Request for "
                f"{', '.join(names)} ($30, a new reference); {number} is kept in the "
                "checkpoints as an earlier NR.")
