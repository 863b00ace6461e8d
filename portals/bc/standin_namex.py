"""The BC stand-in's Name Request back end, as bcgov/namex runs it (see :mod:`.standin`):
its states' transitions, its numbers, its payment's transitions and its duplicate guard.

Sources (bcgov/namex; recorded in tests/facts/bc-registries.txt, docs/portals/bc.md):

* ``api/namex/services/name_request/name_request_state.py``: each ``to_<state>`` accepts
  only some current states, else "Invalid state transition [A] -> [B]" (:data:`FROM`);
* ``api/namex/resources/name_requests/name_requests.py`` (POST): a new NR is saved
  PENDING_PAYMENT under a temporary number ``NR L`` + 6 digits;
  ``api/namex/models/request.py`` (``find_existing_name_by_user``): the same e-mail with the
  same names, DRAFT or PENDING_PAYMENT, submitted within 2 minutes, is refused -- HTTP 500
  "The request with same name is already submitted." -- and after 2 minutes accepted;
* ``api/namex/resources/name_requests/abstract_nr_resource.py`` (``add_new_nr_number``): the
  payment's creation gives the NR its real number ``NR`` + 7 digits;
  ``api/namex/resources/payment/payment.py``: a completed payment moves PENDING_PAYMENT to
  DRAFT (examination), COND-RESERVE to CONDITIONAL and RESERVED to APPROVED.

Pure rules over ledger entries; the pages are :mod:`.standin`'s.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

DUPLICATE_WINDOW = timedelta(minutes=2)
DUPLICATE_MESSAGE = "The request with same name is already submitted."
_CANCELLABLE = frozenset({"DRAFT", "INPROGRESS", "HOLD", "APPROVED", "REJECTED", "CONDITIONAL",
                          "RESERVED", "COND-RESERVE", "PENDING_PAYMENT"})
#: to_<state>: the states an NR may be in to move there (name_request_state.py)
FROM: dict[str, frozenset[str]] = {
    "DRAFT": frozenset({"DRAFT", "INPROGRESS", "PENDING_PAYMENT"}),
    "INPROGRESS": frozenset({"DRAFT", "INPROGRESS"}),
    "COND-RESERVE": frozenset({"DRAFT", "COND-RESERVE"}),
    "RESERVED": frozenset({"DRAFT", "RESERVED"}),
    "CONDITIONAL": frozenset({"DRAFT", "COND-RESERVE", "CONDITIONAL", "INPROGRESS"}),
    "APPROVED": frozenset({"RESERVED", "APPROVED", "INPROGRESS"}),
    "REJECTED": frozenset({"REJECTED"}),
    "CONSUMED": frozenset({"CONSUMED"}),
    "PENDING_PAYMENT": frozenset({"PENDING_PAYMENT"}),
    "CANCELLED": _CANCELLABLE,
    "REFUND_REQUESTED": _CANCELLABLE,
}


class InvalidState(ValueError):
    """namex's InvalidStateError: the NR cannot move there from its state."""


def move(state: str, to: str) -> str:
    if state not in FROM.get(to, frozenset()):
        raise InvalidState(f"Invalid state transition [{state}] -> [{to}], valid states are "
                           f"[{', '.join(sorted(FROM.get(to, ())))}]")
    return to


def paid(state: str, requested: str) -> str:
    """The NR's state once its payment completed: PENDING_PAYMENT goes to DRAFT (into the
    examination queue), or -- an NR created to be RESERVED / COND-RESERVE -- to APPROVED /
    CONDITIONAL (payment.py, handle_payment_response and complete_reservation_payment)."""
    if state != "PENDING_PAYMENT":
        raise InvalidState(f"Invalid NR state [{state}] for a payment")
    if requested == "RESERVED":
        return move(move("DRAFT", "RESERVED"), "APPROVED")
    if requested == "COND-RESERVE":
        return move(move("DRAFT", "COND-RESERVE"), "CONDITIONAL")
    return move(state, "DRAFT")


def temporary_number(taken: Iterable[str]) -> str:
    used = set(taken)
    while (number := f"NR L{secrets.randbelow(1_000_000):06d}") in used:
        pass
    return number


def real_number(taken: Iterable[str]) -> str:
    used = set(taken)
    while (number := f"NR {secrets.randbelow(9_999_999) + 1:07d}") in used:
        pass
    return number


def email_key(email: str) -> str:
    """The applicant's e-mail as the guard compares it (as typed), kept only as a digest."""
    return hashlib.sha256(email.strip().encode()).hexdigest()[:16]


def duplicate(nrs: Iterable[Mapping[str, Any]], names: list[str], key: str,
              now: datetime) -> bool:
    """Would namex refuse these names from this e-mail now (find_existing_name_by_user)?"""
    return any(nr["email_key"] == key and list(nr["names"]) == names
               and nr["namex_state"] in ("DRAFT", "PENDING_PAYMENT")
               and datetime.fromisoformat(nr["submitted_at"]) >= now - DUPLICATE_WINDOW
               for nr in nrs)
