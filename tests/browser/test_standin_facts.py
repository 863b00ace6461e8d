"""The Delaware, BC Registries and CRTC stand-ins against their facts (``tests/facts/``,
extracts of the portals' public material, each naming its sources): the controls, values and words the extracts
name are the stand-ins' (and the flows'), and what the extracts do not name is not drawn as if
it were. Pages are fetched over real HTTP from the running stand-ins."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from portalq.portals import steps
from portalq.portals.bc import flow as bc_flow
from portalq.portals.bc import site as bc_site
from portalq.portals.bc import standin_registry as bc_registry
from portalq.portals.calendar import format_window, parse_hours
from portalq.portals.crtc import flow as crtc_flow
from portalq.portals.crtc import letter as crtc_letter
from portalq.portals.delaware import flow as de_flow
from portalq.portals.delaware import standin_page as de_spa

pytestmark = pytest.mark.browser

FACTS = Path(__file__).parents[1] / "facts"
DE = (FACTS / "delaware.txt").read_text()
BC = (FACTS / "bc-registries.txt").read_text()
CRTC = (FACTS / "gckey-crtc.txt").read_text()


def flat(text: str) -> str:
    return " ".join(text.split())


def get(portals: Any, prefix: str, path: str) -> str:
    with urllib.request.urlopen(portals.url(prefix) + path, timeout=10) as resp:
        return str(resp.read().decode())


def values_after(facts: str, control: str) -> list[str]:
    """The option values the extract lists after ``select[formcontrolname="<control>"]``."""
    m = re.search(rf'formcontrolname="{control}"\]\s+(?:values\s+)?(.*?)(?:\n\s{{8,}}select|'
                  r"\n\s{8,}input|,\s)", facts, re.S)
    assert m, control
    return [v.strip() for v in re.split(r"\|", m.group(1).split("(")[0]) if v.strip()]


# --- Delaware: eCorp2 ---------------------------------------------------------------------

def test_delaware_efiling_controls_values_and_words_are_the_facts(portals):
    named = set(re.findall(r'formcontrolname="(\w+)"', DE))
    page = get(portals, "delaware", "/services/e-filing")
    drawn = set(re.findall(r'formcontrolname="(\w+)"', page))
    assert named - {"userName", "password"} <= drawn, named - drawn
    assert values_after(DE, "workFlowPriority") == list(de_spa.PRIORITIES)
    assert values_after(DE, "documentUploadRequestType") == list(de_spa.REQUEST_TYPES)
    assert values_after(DE, "paymentType") == list(de_spa.PAYMENT_TYPES)
    assert "RegularMail" in DE and "RegularMail" in de_spa.RETURN_METHODS
    for words in (de_flow.SUCCESS, "Service Request Number:", de_flow.SERVICE):
        assert words in DE and words in page, words
    for mark in ('class=k-dialog', 'k-primary', 'class=table-borderless', 'type="file"',
                 'type=submit class="btn btn-primary"'):
        assert mark in page, mark
    for sourced in (".k-dialog", ".k-primary", "table.table-borderless", 'input[type="file"]',
                    'button[type="submit"].btn-primary'):
        assert sourced in DE, sourced
    assert de_flow.PRIORITY in de_spa.PRIORITIES and de_flow.RETURN_METHOD in DE


def test_delaware_signin_is_ecorp2s_formcontrolnames(portals):
    portals.control("delaware_icis", signin={"enabled": True, "accounts": {}})
    page = get(portals, "delaware", "/signin")
    for name in ("userName", "password"):
        assert f'formcontrolname="{name}"' in DE and f'formcontrolname="{name}"' in page
    assert 'type="submit"' in page


# --- BC Registries ----------------------------------------------------------------------

def bc_states() -> set[str]:
    """namerequest's enum and namex's own states."""
    block = BC[BC.index("== Name Request states"):BC.index("Name-choice states")]
    namex = BC[BC.index("== namex NR states"):BC.index("== An NR's life")]
    return set(re.findall(r"\b[A-Z][A-Z_-]{3,}\b", block + namex)) - {
        "NOT", "VALID", "STATE", "INTERIM", "LEGACY", "HYPHEN"}


def test_bc_name_request_states_are_the_real_ones():
    states = bc_states()
    assert {"COND-RESERVE", "PENDING_PAYMENT", "INPROGRESS", "HOLD", "APPROVED",
            "CONDITIONAL", "REJECTED"} <= states
    assert bc_flow.WAITING_STATES <= states
    choices = re.search(r"Name-choice states: (.*?)\.", BC)
    assert choices and set(re.findall(r"[A-Z]+", choices.group(1))) == {
        "APPROVED", "CONDITION", "NE", "REJECTED"}


def test_bc_manage_page_has_namerequests_fields_button_and_answer(portals):
    """namerequest's manage page (existing-request-search.vue, store/actions.ts, as the
    facts record them): the stand-in draws the same fields and button, answers "nothing
    found" in the same words, and the flow reads it by those (portals/bc/site.py)."""
    text = flat(BC)
    labels = re.search(r'manage page \(existing-request-search\.vue\): (.*?), button '
                       r'"(.*?)"', text)
    assert labels
    fields = re.findall(r'"(.*?)"', labels.group(1))
    assert fields == ["NR Number", "Applicant's Phone Number", "Applicant's Notification Email"]
    page = get(portals, "bc", "/nr/status")
    for label in fields:
        assert f">{label}</label>" in page.replace("&#x27;", "'"), label
    assert f">{labels.group(2)}</button>" in page
    answer = flat(get(portals, "bc", "/nr/status?nr=NR+1234567&phone=604-555-0100&email="))
    assert bc_site.NOT_FOUND in answer and bc_site.NOT_FOUND in text
    assert flat(bc_site.DUPLICATE) in text
    assert 'button "Continue to Payment"' in text


def test_bc_name_decisions_shown_are_the_real_name_choice_states(run, portals, make_ctx):
    """A conditional name shows the name-choice state CONDITION (the NR's state is
    CONDITIONAL); not examined: NE."""
    from bckit import NAME_SEARCH, build

    from portalq.jobs.errors import BusinessError
    ctx = make_ctx("name_search", build(NAME_SEARCH, names=["Harbour Trust Ltd."]),
                   trace_policy="off")
    with pytest.raises(BusinessError):
        run(bc_flow.name_search(ctx))
    assert [d[1] for d in ctx.checkpoints["nr_decisions"]] == ["CONDITION"]


def test_bc_payment_words_and_hours_are_paybcs():
    text = flat(BC)
    assert flat(bc_registry.PAYBC_HOURS) in text
    error = bc_registry.PAYMENT_ERROR.replace("This Incorporation Application", "This "
                                              "{{ filingName }}")
    assert flat(error) in text and "Unable to Process Payment" in text
    # the flow's gate keeps the hours the dialog prints (Pacific)
    paybc = steps.STEPS[("bc_corporate_online", "payment")]
    assert paybc.timezone == "America/Vancouver"
    assert [format_window(w) for w in paybc.windows] == [format_window(w) for w in parse_hours(
        "Mon-Fri 06:00-21:00; Sat 00:00-19:00; Sun 12:00-24:00")]
    assert [format_window(w) for w in bc_registry.PAYBC.windows] == [
        format_window(w) for w in paybc.windows]


def test_bc_review_page_statements_are_the_real_ones():
    text = flat(BC)
    for wording in bc_registry.AGREEMENTS.values():
        assert flat(wording) in text, wording
    assert bc_registry.AGREEMENTS == bc_site.AGREEMENT_LABELS
    for statement in bc_registry.COMPLETING_PARTY_STATEMENT:
        assert flat(statement) in text, statement
    for section in ("Incorporation Date and Time", "Document Delivery",
                    "Completing Party Statement", "certify-section", "folio-number"):
        assert section in text


# --- CRTC and GCKey ---------------------------------------------------------------------

def test_crtc_cover_page_and_gckey_are_the_facts(portals):
    assert crtc_flow.NO_AC in CRTC
    page = get(portals, "crtc", "/register")
    assert crtc_flow.NO_AC in flat(page)
    portals.control("crtc", signin={"enabled": True, "accounts": {}})
    signin = get(portals, "crtc", "/signin")
    for mark in ("#token1", "#token2", "button[type=submit]", "h1[property=name]",
                 "input[type=submit]"):
        assert mark in CRTC, mark
    assert 'id="token1"' in signin and 'id="token2"' in signin
    assert 'type="submit"' in signin


def test_crtc_letter_names_the_real_registration_lists():
    lists = re.search(r"\[R2\] lists: (.*?)\.\n", CRTC, re.S)
    assert lists
    real = {flat(x) for x in lists.group(1).split(";")}
    assert set(crtc_letter.LIST_OF_SERVICE.values()) <= real
    assert "within 24 hours of the date the confirmation letter" in flat(CRTC)
    assert "date and time they were received" in flat(CRTC)
