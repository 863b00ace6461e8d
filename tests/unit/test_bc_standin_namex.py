"""The BC stand-in's Name Request back end follows namex (portals/bc/standin_namex.py): its
transitions (api/namex/services/name_request/name_request_state.py), the numbers and the
payment's transitions (api/namex/resources/payment/payment.py), the 2-minute duplicate guard
(api/namex/models/request.py, find_existing_name_by_user)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from portalq.portals.bc import standin_namex as namex

T0 = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)

#: to_<state>: the states it may come from (name_request_state.py)
FROM = {
    "DRAFT": {"DRAFT", "INPROGRESS", "PENDING_PAYMENT"},
    "INPROGRESS": {"DRAFT", "INPROGRESS"},
    "COND-RESERVE": {"DRAFT", "COND-RESERVE"},
    "RESERVED": {"DRAFT", "RESERVED"},
    "CONDITIONAL": {"DRAFT", "COND-RESERVE", "CONDITIONAL", "INPROGRESS"},
    "APPROVED": {"RESERVED", "APPROVED", "INPROGRESS"},
    "REJECTED": {"REJECTED"},
    "CONSUMED": {"CONSUMED"},
    "PENDING_PAYMENT": {"PENDING_PAYMENT"},
    "CANCELLED": {"DRAFT", "INPROGRESS", "HOLD", "APPROVED", "REJECTED", "CONDITIONAL",
                  "RESERVED", "COND-RESERVE", "PENDING_PAYMENT"},
}
FROM["REFUND_REQUESTED"] = FROM["CANCELLED"]
STATES = ["DRAFT", "PENDING_PAYMENT", "INPROGRESS", "CANCELLED", "REFUND_REQUESTED", "HOLD",
          "RESERVED", "COND-RESERVE", "APPROVED", "REJECTED", "CONDITIONAL", "CONSUMED",
          "EXPIRED", "COMPLETED", "NRO_UPDATING", "HISTORICAL"]


@pytest.mark.parametrize("to", sorted(FROM))
@pytest.mark.parametrize("start", STATES)
def test_each_transition_is_namexs(start, to):
    if start in FROM[to]:
        assert namex.move(start, to) == to
    else:
        with pytest.raises(namex.InvalidState, match=rf"\[{start}\] -> \[{to}\]"):
            namex.move(start, to)


def test_numbers_temporary_at_creation_real_at_payment():
    temp = namex.temporary_number(set())
    assert re.fullmatch(r"NR L\d{6}", temp)
    real = namex.real_number({"NR 1234567"})
    assert re.fullmatch(r"NR \d{7}", real) and real != "NR 1234567"


@pytest.mark.parametrize("requested, after", [
    ("DRAFT", "DRAFT"), ("RESERVED", "APPROVED"), ("COND-RESERVE", "CONDITIONAL")])
def test_a_completed_payment_moves_the_nr_as_namex_does(requested, after):
    # created PENDING_PAYMENT; paid: to DRAFT, then RESERVED/COND-RESERVE are approved
    assert namex.paid("PENDING_PAYMENT", requested) == after


def test_a_payment_on_an_nr_in_another_state_is_refused():
    for state in ("EXPIRED", "CANCELLED", "REJECTED", "CONSUMED"):
        with pytest.raises(namex.InvalidState):
            namex.paid(state, "DRAFT")


def _nr(at, state="PENDING_PAYMENT", names=("Cedar Ltd.",), email="ann@example.test"):
    return {"submitted_at": at.isoformat(), "namex_state": state, "names": list(names),
            "email_key": namex.email_key(email)}


def test_the_same_names_by_the_same_email_within_two_minutes_are_refused():
    earlier = [_nr(T0)]
    key = namex.email_key("ann@example.test")
    assert namex.duplicate(earlier, ["Cedar Ltd."], key, T0 + timedelta(seconds=119))
    # after 2 minutes a second, identical NR is accepted (and would be charged)
    assert not namex.duplicate(earlier, ["Cedar Ltd."], key, T0 + timedelta(minutes=2,
                                                                              seconds=1))
    # other names, another e-mail, an NR no longer DRAFT / PENDING_PAYMENT: not a duplicate
    assert not namex.duplicate(earlier, ["Cedar Two Ltd."], key, T0)
    assert not namex.duplicate(earlier, ["Cedar Ltd."], namex.email_key("bo@example.test"), T0)
    # namex compares the e-mail as typed
    assert not namex.duplicate(earlier, ["Cedar Ltd."], namex.email_key("Ann@example.test"), T0)
    assert namex.duplicate([_nr(T0, "DRAFT")], ["Cedar Ltd."], key, T0)
    assert not namex.duplicate([_nr(T0, "APPROVED")], ["Cedar Ltd."], key, T0)
