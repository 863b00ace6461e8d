"""Every state bcgov's Name Request back end (namex) and front end (namerequest) know maps to
one outcome of the flow (portals/bc/name_requests.py ``classify``), and a state neither knows
is a changed portal, never a guess.

The states: namex api/namex/models/state.py (State.ALL_STATES) and namerequest
app/src/enums/nr-state.ts, as recorded in tests/facts/bc-registries.txt."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from portalq.jobs.errors import PortalChanged
from portalq.portals.bc.name_requests import FINISHED_STATES, Outcome, classify

FACTS = (Path(__file__).parents[1] / "facts" / "bc-registries.txt").read_text()

#: what each state means to a job, and why (the sources named in docs/portals/bc.md)
EXPECTED = {
    # created by POST /namerequests, not paid: its payment is the flow's next step
    "PENDING_PAYMENT": Outcome.PAY,
    # paid, queued for examination by staff (payment.py: PENDING_PAYMENT -> DRAFT)
    "DRAFT": Outcome.WAIT,
    "INPROGRESS": Outcome.WAIT,          # an examiner has it
    "HOLD": Outcome.WAIT,                # staff hold it
    "NRO_UPDATING": Outcome.WAIT,        # temporary: the legacy NRO record is being updated
    "RESERVED": Outcome.WAIT,            # becomes APPROVED when its payment completes
    "COND-RESERVE": Outcome.WAIT,        # becomes CONDITIONAL when its payment completes
    "APPROVED": Outcome.APPROVED,
    "CONDITIONAL": Outcome.CONDITIONAL,  # a consent letter first
    "REJECTED": Outcome.REJECTED,
    "EXPIRED": Outcome.FINISHED,
    "CONSUMED": Outcome.FINISHED,
    "CANCELLED": Outcome.FINISHED,
    "REFUND_REQUESTED": Outcome.FINISHED,
    "REFUNDED": Outcome.FINISHED,
    "COMPLETED": Outcome.FINISHED,       # "NOT A VALID STATE" for namerequest; legacy
    "HISTORICAL": Outcome.FINISHED,
    "ASSUMED": Outcome.FINISHED,         # namerequest's legacy state
}


def known_states() -> set[str]:
    namex = FACTS[FACTS.index("== namex NR states"):]
    namex = namex[:namex.index("\n\n")]
    front = FACTS[FACTS.index("== Name Request states the real UI knows"):]
    front = front[:front.index("Name-choice states")]
    return set(re.findall(r"\b[A-Z][A-Z_]+(?:-[A-Z]+)?\b", namex.split("]", 1)[1])) | set(
        re.findall(r"\b[A-Z][A-Z_]+(?:-[A-Z]+)?\b", front.split("]", 1)[1])) - {
            "NOT", "A", "VALID", "STATE", "INTERIM", "LEGACY", "HYPHEN"}


def test_the_table_covers_every_state_bcgov_knows():
    assert set(EXPECTED) == known_states()


@pytest.mark.parametrize("state, outcome", sorted(EXPECTED.items()))
def test_each_state_has_its_outcome(state, outcome):
    assert classify(state) is outcome


@pytest.mark.parametrize("state", ["", "PENDING", "APPROVED!", "nro_updating"])
def test_a_state_no_source_shows_is_a_changed_portal(state):
    with pytest.raises(PortalChanged, match="Name Request state"):
        classify(state)


def test_an_nr_in_a_finished_state_is_never_used_again():
    assert FINISHED_STATES == {s for s, o in EXPECTED.items()
                               if o in (Outcome.FINISHED, Outcome.REJECTED)}
