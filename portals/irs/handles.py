"""Every handle by which ``obtain_ein`` finds a control on the IRS's Apply for EIN app, with
its source: the facts file (under ``tests/facts/``) and the text in it that fixes the handle.

A handle is what the flow passes to a finder: an input or select name (``[name=...]``), a
radio's ``label[for=<VALUE><name>id]``, an aria-label or a link's text. Each comes from the
production bundle's components or its content files (``tests/facts/irs-bundle-controls.txt``
records them page by page) or from public automation of the app; the option values the flow
chooses are declared with theirs (:data:`VALUES`), and the selects whose options the captures
lack are listed (:data:`OPTIONS_UNKNOWN`). A page that lacks a handle stops the flow (the drift
stop), never a guess on another control. ``tests/unit/test_selector_sources.py`` checks that
every handle the flow uses is declared here, that each cited source contains its quote and the
quote the handle.
"""

from __future__ import annotations

from dataclasses import dataclass

FACTS = "tests/facts/irs-applyein.txt"           # the app's content files and public automation
LEGACY = "tests/facts/irs-published-and-legacy.txt"
BUNDLE = "tests/facts/irs-ein-assignment.txt"    # recorded from the production bundle
CONTROLS = "tests/facts/irs-bundle-controls.txt"  # the bundle's form controls, page by page


@dataclass(frozen=True)
class Source:
    file: str
    #: the text of ``file`` that fixes the handle (it contains the handle's own text)
    quote: str


def _named(name: str) -> Source:
    return Source(CONTROLS, f'uniqueInputName:"{name}"')


#: handle (as the flow writes it) -> its source
SOURCED: dict[str, Source] = {
    "Begin Application Now": Source(LEGACY, 'a:has-text("Begin Application Now")'),
    "Continue": Source(FACTS, "buttons: Back (aria-label 'Back') | Continue (aria-label "
                              "'Continue')"),
    "Submit EIN Request": Source(FACTS, "submit button[aria-label=\"Submit EIN Request\"]"),
    "Download EIN confirmation Letter [PDF]": Source(
        FACTS, "button: 'Download EIN confirmation Letter [PDF]' (aria-label 'Download EIN "
               "confirmation Letter [PDF]')"),
    "Review and confirm": Source(FACTS, "final checkbox error: Review and confirm: Checkbox "
                                        "must be checked before continuing."),
    # Legal Structure (radios through their label, label[for=<VALUE><name>id])
    "legalStructureInput": Source(CONTROLS,
                                  'Gi(v.legalStructureInputControl,"legalStructureInput")'),
    "solePropStructureInput": Source(
        CONTROLS, 'Kr(y.soleProprietorStructureInputControl,"solePropStructureInput")'),
    "partnershipStructureInput": Source(
        CONTROLS, 'Di(_.partnershipStructureInputControl,"partnershipStructureInput")'),
    "corpStructureInput": Source(CONTROLS, 'Zr(S.corpStructureInputControl,"corpStructureInput")'),
    "membersOfLlcInput": Source(CONTROLS, 'E.jsx(bn,{inputName:"membersOfLlcInput" ...})'),
    "stateInputControl": Source(CONTROLS, 'E.jsx(sa,{inputName:"stateInputControl" ...})'),
    "reasonForApplyingInputControl": Source(
        FACTS, "reasonForApplyingInputControl (NEW_BUSINESS, HIRED_EMPLOYEES, BANKING_NEEDS, "
               "CHANGING_LEGAL_STRUCTURE, PURCHASED_BUSINESS)"),
    # Identity, and the designee's name on the Third Party page (the same inputs)
    "responsibleFirstName": _named("responsibleFirstName"),
    "responsibleMiddleName": _named("responsibleMiddleName"),
    "responsibleLastName": _named("responsibleLastName"),
    "responsibleSuffix": _named("responsibleSuffix"),
    "responsibleSsn": Source(FACTS, "step2 responsibleSsn"),
    "entityRoleRadioInput": Source(CONTROLS, "the role: entityRoleRadioInput, values yes / no"),
    # Third Party
    "thirdPartyDesigneeInput": Source(
        CONTROLS, 'Dt(M.thirdPartyDesigneeInputControl,"thirdPartyDesigneeInput")'),
    "thirdPartyComplianceInput": Source(
        CONTROLS, 'Nr(M.thirdPartyComplianceInputControl,"thirdPartyComplianceInput")'),
    # Addresses (the Third Party page's designee address has the same inputs)
    "physicalStreet": _named("physicalStreet"), "physicalCity": _named("physicalCity"),
    "physicalState": _named("physicalState"), "physicalZipCode": _named("physicalZipCode"),
    "thePhone": _named("thePhone"),
    "otherAddress": Source(CONTROLS, 'Sn(Mt,"otherAddress")'),
    # Additional Details
    "legalNameInput": Source(CONTROLS, 'E.jsx(u8,{inputName:"legalNameInput" ...})'),
    "countyInput": Source(CONTROLS, "inputName:pe+\"Input\" = countyInput"),
    "stateInput": Source(CONTROLS, "select inputName:le+\"Input\" = stateInput"),
    "StateFiledArticlesOrganizationInput": Source(
        CONTROLS, "inputName:Z+\"Input\" = StateFiledArticlesOrganizationInput"),
    "StateFiledArticlesIncorporationInput": Source(
        CONTROLS, "select\n    StateFiledArticlesIncorporationInput"),
    "startDateMonthInput": Source(CONTROLS, 'E.jsx(sa,{inputName:"startDateMonthInput" ...})'),
    "startDateYearInput": Source(CONTROLS, 'E.jsx(bn,{inputName:"startDateYearInput" ...})'),
    "ClosingMonthOfAccountingInput": Source(
        CONTROLS, "select\n    ClosingMonthOfAccountingInput"),
    "highwayVehiclesInput": Source(CONTROLS, 'E.jsx(Zt,{inputName:"highwayVehiclesInput" ...})'),
    "gamblingWagerInput": Source(CONTROLS, 'E.jsx(Zt,{inputName:"gamblingWagerInput" ...})'),
    "fileForm720Input": Source(CONTROLS, 'E.jsx(Zt,{inputName:"fileForm720Input" ...})'),
    "atfInput": Source(CONTROLS, 'E.jsx(Zt,{inputName:"atfInput" ...})'),
    "hasEmployeesInput": Source(CONTROLS, 'E.jsx(Zt,{inputName:"hasEmployeesInput" ...})'),
    # Provided Business Activity and Services
    "entityBusinessCategoryInput": Source(
        CONTROLS, 'ct(M.subHeader,M.businessCategoryInputControl,"entityBusinessCategoryInput"'),
    "otherInput": Source(CONTROLS,
                         'ct(X.subHeader,X.otherActivitiesFirstInputControl,"otherInput"'),
    "otherActivityTextInput": Source(
        CONTROLS, 'at(X.otherActivitiesSecondInputControl,"otherActivityTextInput"'),
    # Review & Submit
    "confirmationLetterRadioInput": Source(
        CONTROLS, 'E.jsx(Zt,{value:U,inputName:"confirmationLetterRadioInput" ...})'),
}

#: handles no real material fixes: none left (each closed gap moved to SOURCED with its
#: source). A control only a guess could find is not looked for: the flow stops there.
GAPS: frozenset[str] = frozenset()

#: selects whose options come from the app's ``shared`` namespace (stateTypes1), which the
#: published captures lack (tests/facts/irs-bundle-controls.txt §10): the select is sourced
#: and its values are USPS codes (the bundle's sample application, §1), but not which codes
#: it offers. The flow chooses the option whose value is the payload's code and stops as a
#: changed page when there is none -- never an option picked by a guess at its words.
OPTIONS_UNKNOWN: frozenset[str] = frozenset({
    "stateInputControl", "physicalState", "stateInput", "StateFiledArticlesOrganizationInput",
    "StateFiledArticlesIncorporationInput"})
#: the month selects' values (the bundle's code, §1): the flow's month n is MONTHS[n - 1]
MONTHS = ("JANUARY", "FEBRUARY", "MARCH", "APRIL", "MAY", "JUNE", "JULY", "AUGUST",
          "SEPTEMBER", "OCTOBER", "NOVEMBER", "DECEMBER")


def _choices(section: str) -> Source:
    return Source(CONTROLS, section)


_MONTHS = _choices("the month values, the cases of Ot in order: JANUARY FEBRUARY MARCH APRIL "
                   "MAY JUNE JULY AUGUST SEPTEMBER OCTOBER\n  NOVEMBER DECEMBER")
_YES_NO = _choices('yes/no radios\n    (ein__additionalDetails.json tellUsMoreAboutSection, '
                   'choices yes "Yes", no "No")')

#: the option values the flow chooses, per radio or select of known options, each with the
#: source that lists it (the quote contains the value)
VALUES: dict[str, dict[str, Source]] = {
    "legalStructureInput": {v: _choices(f'{v} "{t}"') for v, t in (
        ("LLC", "Limited Liability Company (LLC)"), ("SOLE_PROPRIETOR", "Sole Proprietor"),
        ("CORPORATION", "Corporations"), ("PARTNERSHIP", "Partnerships"))},
    "solePropStructureInput": {"SOLE_PROPRIETOR": _choices(
        'choices soleProprietorSection: SOLE_PROPRIETOR "Sole Proprietor"')},
    "partnershipStructureInput": {"PARTNERSHIP": _choices(
        'choices partnershipSection: PARTNERSHIP "Partnership"')},
    "corpStructureInput": {"CORPORATION": _choices(
        'choices corpSection: CORPORATION "Corporation"')},
    "reasonForApplyingInputControl": {
        v: SOURCED["reasonForApplyingInputControl"] for v in (
            "NEW_BUSINESS", "HIRED_EMPLOYEES", "BANKING_NEEDS", "CHANGING_LEGAL_STRUCTURE",
            "PURCHASED_BUSINESS")},
    "responsibleSuffix": {v: _choices(f'{v} "{t}"') for v, t in (
        ("DDS", "DDS"), ("MD", "MD"), ("PHD", "PHD"), ("JR", "Jr"), ("SR", "Sr"), ("I", "I"),
        ("II", "II"), ("III", "III"), ("IV", "IV"), ("V", "V"), ("VI", "VI"))},
    "entityRoleRadioInput": {"yes": SOURCED["entityRoleRadioInput"],
                             "no": SOURCED["entityRoleRadioInput"]},
    "thirdPartyDesigneeInput": {"yes": _choices('values from the code: B==="yes"')},
    "thirdPartyComplianceInput": {"yes": _choices('$==="yes" / "no"')},
    "otherAddress": {"no": _choices('where you want your mail to be sent?": yes "Yes", no "No"')},
    **{name: {"no": _YES_NO} for name in ("highwayVehiclesInput", "gamblingWagerInput",
                                         "fileForm720Input", "atfInput")},
    "hasEmployeesInput": {
        "no": _choices('inputName:"hasEmployeesInput" ...})   yes "Yes" / no "No"')},
    "entityBusinessCategoryInput": {"OTHER": _choices('WHOLESALE, OTHER ($==="OTHER")')},
    "otherInput": {"OTHER": _choices('radio; Ge==="OTHER" among')},
    **{name: {m: _MONTHS for m in MONTHS}
       for name in ("startDateMonthInput", "ClosingMonthOfAccountingInput")},
    "confirmationLetterRadioInput": {
        "DIGITAL": _choices('DIGITAL "Receive letter digitally in the next step"'),
        "MAIL": _choices('MAIL "Receive letter by mail (allow up to 4 weeks for delivery)"')},
}


def option(name: str, value: str) -> str:
    """The label of the radio ``name``'s option ``value`` (the app listens on labels)."""
    assert name in SOURCED, name
    return f'label[for="{value}{name}id"]'


def named(name: str) -> str:
    """The input or select ``name``."""
    assert name in SOURCED, name
    return f'[name="{name}"]'
