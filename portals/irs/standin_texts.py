"""The IRS EIN application's own words, as the stand-in shows them.

Follows ``docs/portals/irs.md`` and its facts extract ``tests/facts/irs-applyein.txt`` (a
test checks every text here against it, and the form's words against
``tests/facts/irs-bundle-controls.txt``): §1 routes and titles, §2 step indicator labels, §5 alert
texts (keyed ``<page>/<key>``), §6 review, §7 EIN Assignment, §8 session, §9 labels.
Labels the extract does not give are marked ``[?]`` where they are defined.
"""

from __future__ import annotations

#: §1 route -> (title, step index 1..6 or 0 for pages outside the step indicator)
ROUTES: dict[str, tuple[str, int]] = {
    "": ("Apply For Ein", 0), "applyForEin": ("Apply For Ein", 0),
    "legalStructure": ("Legal Structure", 1), "identityOfEntities": ("Identity", 2),
    "thirdPartyEntries": ("Third Party", 2), "addAddresses": ("Addresses", 3),
    "verifyAddresses": ("Apply for an Employee Identification Number (EIN)", 3),
    "additionalDetails": ("Additional Details", 4),
    "activityAndServices": ("Provided Business Activity and Services", 4),
    "reviewAndSubmit": ("Review and Submit", 5), "einAssignment": ("EIN Assignment", 6),
    "thankYou": ("Thank You", 0), "sessionExpired": ("Session Expired", 0),
    "serviceUnavailable": ("Service Unavailable", 0),
}
#: §2
STEP_LABELS = ["Legal Structure", "Identity", "Addresses", "Additional Details",
               "Review & Submit", "EIN Assignment"]

_CALL = ("Please call 1-800-829-4933 for assistance. When outside the U.S., call 267-941-1099. "
         "TTY/TDD: 1-800-829-4059.")
_MENTION = "Please have your information readily available and mention reference number: " \
    "{{referenceNumber}}."
_UNABLE = ("We apologize for the inconvenience but based on the information provided we are "
           "unable to provide you with an EIN through this online assistant.")
_SS4 = _UNABLE + " You must submit a Form SS-4 by fax or mail."
_TECH = ("We apologize for the inconvenience, but the system is experiencing technical "
         "difficulties. Please try back later. If the problem continues, please submit a Form "
         "SS-4 by fax or mail.")
_NO_EIN = "We are unable to provide you with an EIN."
_TOO_MANY = ("You've attempted too many requests for today.",
             ["A responsible party is limited to receipt of one (1) EIN per business day."])
_EDIT = ("In order for your application to be processed, you must edit the taxpayer's "
         "information appropriately so the above item(s) no longer match.")

#: §5: "<page>/<key>" -> (errorMsg, [text, ...])
ALERTS: dict[str, tuple[str, list[str]]] = {
    "identity/pageErrorSameTinDeceased": (
        "The Responsible Party cannot have the same SSN as the deceased person.", [_EDIT]),
    "identity/pageErrorSameTinProtected": (
        "The Responsible Party cannot have the same SSN as the protected person.", [_EDIT]),
    "identity/pageError400Ref112": ("Apply for EIN is experiencing a technical problem.", [_TECH]),
    "identity/pageError401Ref101": (_NO_EIN, [_UNABLE, _CALL, _MENTION]),
    "identity/pageError401Ref102": (_NO_EIN, [_SS4]),
    "identity/pageError401Ref115": (_NO_EIN, [_UNABLE, _CALL, _MENTION]),
    "identity/pageError429Ref105": (_NO_EIN, [_SS4]),
    "identity/pageError429Ref114": _TOO_MANY,
    "identity/pageError500": ("Apply for EIN is currently unavailable.", [_TECH]),
    "reviewAndSubmit/pageError400Ref112": (
        "Apply for EIN is experiencing a technical problem.", [_TECH]),
    "reviewAndSubmit/pageError401Ref103": (_NO_EIN, [_SS4]),
    "reviewAndSubmit/pageError401Ref112": (_NO_EIN, [_SS4]),
    "reviewAndSubmit/pageError403Ref101": (
        "Please wait for ApplyEIN to finish processing application submission.",
        ["If problem persists please refresh the page or resubmit the application."]),
    "reviewAndSubmit/pageError429Ref101": (_NO_EIN, [_UNABLE, _CALL, _MENTION]),
    "reviewAndSubmit/pageError429Ref114": _TOO_MANY,
    "reviewAndSubmit/pageError500": ("Apply for EIN is currently unavailable.", [_TECH]),
    "all/pageErrorInputError1": ("The following error has occurred: ", []),
    "all/pageErrorInputError2": ("The following {{numberOfErrors}} errors have occurred: ", []),
}

#: §9
STRUCTURES = {"SOLE_PROPRIETOR": "Sole Proprietor", "PARTNERSHIP": "Partnerships",
              "CORPORATION": "Corporations", "LLC": "Limited Liability Company (LLC)",
              "ESTATE": "Estate", "ALL_OTHERS_TRUST": "Trusts", "OTHER_NON_PROFIT":
              "View Additional Types, Including Tax-Exempt and Governmental Organizations"}
#: each structure's own radio (tests/facts/irs-bundle-controls.txt §2): name -> value -> text
SUB_TYPES = {"SOLE_PROPRIETOR": ("solePropStructureInput", {
                 "SOLE_PROPRIETOR": "Sole Proprietor", "HOUSEHOLD_EMPLOYER": "Household Employer"}),
             "CORPORATION": ("corpStructureInput", {
                 "CORPORATION": "Corporation", "SCORP": "S Corporation",
                 "PERSONAL_SERVICE_CORPORATION": "Personal Service Corporation",
                 "REIT": "Real Estate Investment Trust (REIT)",
                 "RIC": "Regulated Investment Conduit (RIC)",
                 "SETTLEMENT_FUND": "Settlement Fund (under IRC Sec 468B)"}),
             "PARTNERSHIP": ("partnershipStructureInput", {
                 "PARTNERSHIP": "Partnership", "JOINT_VENTURE": "Joint Venture"})}
#: the content files' field names the stand-in labels its controls with (facts §2-§6)
FIELD_NAMES = {
    "structure": "Choose type of legal structure", "subType": "Choose the type of legal structure",
    "members": "How many member(s) are in the LLC?",
    "llcState": "Please select the state/territory where the business is physically located",
    "reason": "Choose one reason that best describes why you are applying for an EIN",
    "role": "Choose one", "suffix": "Suffix",
    "otherAddress": "Do you have an address different from the above where you want your mail "
                    "to be sent?",
    "county": "County where {{entityName}} is located",
    "stateLocation": "State/Territory where the {{entityName}} is located",
    "articlesOrganization": "State/Territory where articles of organization are (or will be) "
                            "filed",
    "articlesIncorporation": "State/Territory where articles of incorporation are (or will be) "
                             "filed",
    "closingMonth": "Closing month of accounting year",
    "highway": "Does your business own a highway motor vehicle with a taxable gross weight of "
               "55,000 pounds or more?",
    "gambling": "Does your business involve gambling/wagering?",
    "form720": "Does your business need to file Form 720 (Quarterly Federal Excise Tax Return)?",
    "atf": "Does your business sell or manufacture alcohol, tobacco, or firearms?",
    "employees": "Do you have, or do you expect to have, any employees who will receive Forms "
                 "W-2 in the next 12 months? (Forms W-2 require additional filings with the IRS.)",
}
#: ein__identity.json roleSection.roleInputControl.LLC (the LLC's words; links as text)
ROLE_YES = "I am one of the members, owners, or the managing member of this LLC."
ROLE_NO = "I am a third party applying for an EIN on behalf of this LLC."
#: ein__identity.json responsiblePersonSection.suffixInputControl: value -> text
SUFFIXES = {"DDS": "DDS", "MD": "MD", "PHD": "PHD", "JR": "Jr", "SR": "Sr", "I": "I", "II": "II",
            "III": "III", "IV": "IV", "V": "V", "VI": "VI"}
REASONS = {"NEW_BUSINESS": "Started a new business", "HIRED_EMPLOYEES": "Hired employee(s)",
           "BANKING_NEEDS": "Banking purposes",
           "CHANGING_LEGAL_STRUCTURE": "Changed type of organization",
           "PURCHASED_BUSINESS": "Purchased active business"}
LLC_MEMBERS = "Tell us more about the members of the Limited Liability Company (LLC)"
CONFIRM_ERROR = "Review and confirm: Checkbox must be checked before continuing."

#: §6
LETTER_DIGITAL = "Receive letter digitally in the next step"
LETTER_MAIL = "Receive letter by mail (allow up to 4 weeks for delivery)"
LETTER_REQUIRED = "Confirmation Letter: Selection is required."
SUBMIT_INSTRUCTIONS = ('Click "Submit EIN Request" to send your request and receive your EIN. '
                       "Once you submit, please wait while your application is being processed. "
                       "It can take up to two minutes for your application to be processed.")
SUBMIT = "Submit EIN Request"
CANCEL_ARIA = "Cancel link, click enter to go to Apply for EIN Page"

#: §7
CONGRATULATIONS = "Congratulations! Your EIN has been successfully assigned."
SAVE_PRINT = ("Save and/or print this page and the confirmation letter below for your permanent "
              "records.")
FIELDS = ["EIN assigned", "Legal name", "Name control", "Confirmation letter"]
DIGITAL_NOTE = ("This confirmation letter is your official IRS notice and contains important "
                "information regarding your EIN:")
MAIL_NOTE = ("Your confirmation letter will be mailed to you. This letter will be your official "
             "IRS notice and will contain important information regarding your EIN. Allow up to "
             "4 weeks for your letter to arrive by mail.")
DOWNLOAD = "Download EIN confirmation Letter [PDF]"
#: tests/facts/irs-ein-assignment.txt §5 (ein__einAssignment.json confirmationLetterNoteMail)
MAIL_NOTE_DESIGNEE = ("The confirmation letter will be mailed to the applicant. This letter will "
                      "be the applicants official IRS notice and will contain important "
                      "information regarding your EIN. Allow up to 4 weeks for your letter to "
                      "arrive by mail.")

#: §8
MORE_TIME = "Do you need more time?"
EXPIRES_IN = "Your session will expire in {time}."
