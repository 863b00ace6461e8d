"""Every handle by which ``obtain_ein`` finds a control on the IRS's Apply for EIN app, with
its source: the facts file (under ``tests/facts/``) and the text in it that fixes the handle.

A handle is what the flow passes to a finder: an input name (``[name=...]``), a radio's
``label[for=<VALUE><name>id]``, an aria-label, a link's text, or — for the controls no
real material names yet — the label or group text the stand-in gives it. Those last are
declared with no source (:data:`GAPS`): they are guesses, listed so that they can only
shrink knowingly, and a page that lacks one stops the flow (the drift stop), never a guess
on another control. ``tests/unit/test_irs_handles.py`` checks that every handle the flow
uses is declared here, that each cited source contains its quote and the quote the handle,
and that the gaps are exactly the ones listed.
"""

from __future__ import annotations

from dataclasses import dataclass

FACTS = "tests/facts/irs-applyein.txt"           # the app's content files and public automation
LEGACY = "tests/facts/irs-published-and-legacy.txt"
BUNDLE = "tests/facts/irs-ein-assignment.txt"    # recorded from the production bundle


@dataclass(frozen=True)
class Source:
    file: str
    #: the text of ``file`` that fixes the handle (it contains the handle's own text)
    quote: str


#: handle (as the flow writes it) -> its source
SOURCED: dict[str, Source] = {
    "Begin Application Now": Source(LEGACY, 'a:has-text("Begin Application Now")'),
    "Continue": Source(FACTS, "buttons: Back (aria-label 'Back') | Continue (aria-label "
                              "'Continue')"),
    "Submit EIN Request": Source(FACTS, "submit button[aria-label=\"Submit EIN Request\"]"),
    "Download EIN confirmation Letter [PDF]": Source(
        FACTS, "button: 'Download EIN confirmation Letter [PDF]' (aria-label 'Download EIN "
               "confirmation Letter [PDF]')"),
    # radios: through their label, label[for=<VALUE><name>id] (the inputs ignore clicks)
    "legalStructureInput": Source(FACTS, "label[for=<VALUE>legalStructureInputid]"),
    "reasonForApplyingInputControl": Source(
        FACTS, "reasonForApplyingInputControl (NEW_BUSINESS, HIRED_EMPLOYEES, BANKING_NEEDS, "
               "CHANGING_LEGAL_STRUCTURE, PURCHASED_BUSINESS)"),
    "entityRoleRadioInput": Source(FACTS, "entityRoleRadioInput=yes"),
    "membersOfLlcInput": Source(BUNDLE, "membersOfLlcInput"),
    "responsibleFirstName": Source(FACTS, "responsibleFirstName"),
    "responsibleMiddleName": Source(FACTS, "responsibleMiddleName"),
    "responsibleLastName": Source(FACTS, "responsibleLastName"),
    "responsibleSsn": Source(FACTS, "step2 responsibleSsn"),
    "Review and confirm": Source(FACTS, "final checkbox error: Review and confirm: Checkbox "
                                        "must be checked before continuing."),
    "Confirmation Letter": Source(FACTS, "required-choice error: Confirmation Letter: "
                                         "Selection is required."),
    "Receive letter digitally in the next step": Source(
        FACTS, "confirmation letter choice: Receive letter digitally in the next step"),
    "Receive letter by mail (allow up to 4 weeks for delivery)": Source(
        FACTS, "confirmation letter choice: Receive letter by mail (allow up to 4 weeks for "
               "delivery)"),
}

#: handles no real material fixes yet: the stand-in's own words (recorded from the bundle
#: next, tests/facts/irs-ein-assignment.txt §6 lists its real input names)
GAPS: frozenset[str] = frozenset({
    "What type of corporation are you applying for?",
    "What type of partnership are you applying for?",
    "State where located", "Suffix",
    "Third party designee's name", "Street", "City", "State", "ZIP code", "Phone number",
    "Fax number", "Do you have a different mailing address?",
    "Legal name", "State where the entity is organized", "Start month", "Start year",
    "Closing month of accounting year",
    "Does the business own a highway motor vehicle with a taxable gross weight of 55,000 "
    "pounds or more?",
    "Does the business involve gambling or wagering?",
    "Does the business need to file Form 720?",
    "Does the business sell or manufacture alcohol, tobacco, or firearms?",
    "Does the business have or expect to have employees?",
    "Number of employees expected in the next 12 months",
    "Which category best describes your business?",
    "Describe the principal activity of the business",
    # option labels of the stand-in's yes/no radios and of the business category
    "No", "Other",
})


#: the option values the flow chooses, per radio: sourced by the same quote as the radio's
#: name (it lists them), or a gap
VALUES: dict[str, dict[str, Source | None]] = {
    "legalStructureInput": {
        "LLC": Source(FACTS, "input[name=legalStructureInput] (values SOLE_PROPRIETOR, LLC"),
        "SOLE_PROPRIETOR": Source(FACTS, "input[name=legalStructureInput] (values SOLE_PROPRIETOR"),
        "CORPORATIONS": None, "PARTNERSHIPS": None},
    "reasonForApplyingInputControl": {
        v: SOURCED["reasonForApplyingInputControl"] for v in (
            "NEW_BUSINESS", "HIRED_EMPLOYEES", "BANKING_NEEDS", "CHANGING_LEGAL_STRUCTURE",
            "PURCHASED_BUSINESS")},
    "entityRoleRadioInput": {"yes": SOURCED["entityRoleRadioInput"], "no": None},
}


def option(name: str, value: str) -> str:
    """The label of the radio ``name``'s option ``value`` (the app listens on labels)."""
    assert name in SOURCED, name
    return f'label[for="{value}{name}id"]'


def named(name: str) -> str:
    """The input ``name``."""
    assert name in SOURCED, name
    return f'[name="{name}"]'
