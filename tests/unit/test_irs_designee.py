"""Who applies for an EIN, decided when the payload is validated (portals/irs/payload.py):
the payload's designee, else "the responsible party applies in person", else the firm's
designee from PORTALQ_IRS_DESIGNEE_*, else a one-line refusal saying what to set."""

from __future__ import annotations

import pytest

from portalq.jobs import types
from portalq.jobs.errors import InputError
from portalq.portals.order_kinds import DelawareLlcInput
from tests import payloads
from tests.order_inputs import DELAWARE_LLC

FIRM = {"NAME": "Firm Designee Inc", "STREET": "1 Agent Sq", "CITY": "Wilmington",
        "STATE": "DE", "ZIP": "19801", "PHONE": "302-555-0150", "FAX": "302-555-0151"}
OWN = {"name": "Own Designee LLC", "phone": "302-555-0160",
       "address": {"street": "2 Own St", "city": "Dover", "region": "DE",
                   "postal_code": "19901"}}


@pytest.fixture
def firm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FIRM.items():
        monkeypatch.setenv(f"PORTALQ_IRS_DESIGNEE_{name}", value)


@pytest.fixture
def no_firm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in FIRM:
        monkeypatch.delenv(f"PORTALQ_IRS_DESIGNEE_{name}", raising=False)


def stored(payload: dict[str, object]) -> dict[str, object]:
    return types.validate_payload("obtain_ein", payload)[1]


def test_a_payload_without_designee_applies_as_the_firms(firm: None) -> None:
    assert stored(payloads.OBTAIN_EIN)["third_party_designee"] == {
        "name": "Firm Designee Inc", "phone": "302-555-0150", "fax": "302-555-0151",
        "address": {"street": "1 Agent Sq", "city": "Wilmington", "region": "DE",
                    "postal_code": "19801", "country": "US"}}
    explicit = stored({**payloads.OBTAIN_EIN, "applicant": "designee"})
    assert explicit["third_party_designee"]["name"] == "Firm Designee Inc"


def test_the_stored_designee_is_kept_when_the_settings_change(
        firm: None, monkeypatch: pytest.MonkeyPatch) -> None:
    first = stored(payloads.OBTAIN_EIN)
    monkeypatch.setenv("PORTALQ_IRS_DESIGNEE_NAME", "Another Firm")
    # the worker validates the stored payload again: the job applies as at enqueue
    assert stored(first)["third_party_designee"]["name"] == "Firm Designee Inc"


def test_the_payloads_own_designee_wins_and_in_person_has_none(firm: None) -> None:
    assert stored({**payloads.OBTAIN_EIN, "third_party_designee": OWN}
                  )["third_party_designee"]["name"] == "Own Designee LLC"
    in_person = stored({**payloads.OBTAIN_EIN, "applicant": "responsible_party"})
    assert "third_party_designee" not in in_person
    assert in_person["applicant"] == "responsible_party"


def test_no_designee_anywhere_is_one_line_saying_what_to_set(no_firm: None) -> None:
    with pytest.raises(InputError) as info:
        stored(payloads.OBTAIN_EIN)
    message = str(info.value)
    assert "\n" not in message and message.startswith(
        "invalid obtain_ein payload: third_party_designee: no third-party designee: set "
        "PORTALQ_IRS_DESIGNEE_NAME")
    assert '"applicant": "responsible_party"' in message
    # the responsible party applying in person needs no settings
    assert "third_party_designee" not in stored(
        {**payloads.OBTAIN_EIN, "applicant": "responsible_party"})
    assert stored({**payloads.OBTAIN_EIN, "third_party_designee": OWN})


def test_contradictions_and_half_settings_are_refused(
        firm: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match='"applicant": "responsible_party" applies without '
                                         "a third-party designee"):
        stored({**payloads.OBTAIN_EIN, "applicant": "responsible_party",
                "third_party_designee": OWN})
    with pytest.raises(InputError, match="applicant: Input should be"):
        stored({**payloads.OBTAIN_EIN, "applicant": "the firm"})
    monkeypatch.delenv("PORTALQ_IRS_DESIGNEE_ZIP")
    with pytest.raises(InputError, match="the IRS third-party designee is incomplete: set "
                                         "PORTALQ_IRS_DESIGNEE_ZIP too"):
        stored(payloads.OBTAIN_EIN)
    monkeypatch.setenv("PORTALQ_IRS_DESIGNEE_ZIP", "19801")
    monkeypatch.setenv("PORTALQ_IRS_DESIGNEE_PHONE", "call us")
    with pytest.raises(InputError, match="invalid setting PORTALQ_IRS_DESIGNEE_PHONE"):
        stored(payloads.OBTAIN_EIN)


def test_an_order_that_cannot_apply_is_refused_when_it_comes_in(no_firm: None) -> None:
    """Not after its filing, when the EIN step's turn comes."""
    with pytest.raises(ValueError, match="no third-party designee"):
        DelawareLlcInput.model_validate(DELAWARE_LLC)
    assert DelawareLlcInput.model_validate(
        {**DELAWARE_LLC, "applicant": "responsible_party"}).third_party_designee is None


@pytest.mark.parametrize(("name", "value"), [
    ("NAME", "Firm Designee Inc\nBcc: someone"), ("NAME", "F" * 10_000),
    ("STREET", "1 Agent Sq\r\nSuite 9"), ("STREET", "S" * 10_000), ("CITY", "Wil\x1bmington"),
    ("CITY", "C" * 10_000), ("ZIP", "19801\n"), ("ZIP", "9" * 10_000)])
def test_a_designee_setting_is_one_bounded_line_like_a_payload_field(
        firm: None, monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    """Issue 48 item 17: a line break or 10,000 characters in a PORTALQ_IRS_DESIGNEE_*
    went into every EIN payload; refused when the settings are read, naming the setting,
    never echoing its value."""
    monkeypatch.setenv(f"PORTALQ_IRS_DESIGNEE_{name}", value)
    with pytest.raises(InputError) as info:
        stored(payloads.OBTAIN_EIN)
    message = str(info.value)
    assert f"PORTALQ_IRS_DESIGNEE_{name}" in message and "\n" not in message
    assert value.strip()[:20] not in message


@pytest.mark.parametrize("field", ["name", "street", "city"])
def test_a_payloads_own_designee_is_held_to_the_same_lines(firm: None, field: str) -> None:
    for bad in ("Own\nDesignee", "x" * 10_000):
        own = ({**OWN, "name": bad} if field == "name"
               else {**OWN, "address": {**OWN["address"], field: bad}})
        with pytest.raises(InputError, match="third_party_designee"):
            stored({**payloads.OBTAIN_EIN, "third_party_designee": own})
