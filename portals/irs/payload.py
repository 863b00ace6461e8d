"""What ``obtain_ein`` carries: the IRS's Apply for EIN questions, answered.

Who applies is always decided when the payload is validated (at enqueue), never left to the
flow: a formation firm applying for its client is the IRS's third-party designee and must say
so (``docs/portals/irs.md``, "Who applies"). So, in order:

- ``third_party_designee`` given: that designee applies;
- ``"applicant": "responsible_party"``: the responsible party applies in person (no designee);
- neither: the deployment's designee (``PORTALQ_IRS_DESIGNEE_*``) applies, and is written into
  the stored payload (the job says who applied, whatever the settings say later); none
  configured: the job is refused, saying what to set.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from portalq.jobs import settings
from portalq.jobs.errors import InputError
from portalq.jobs.settings.irs import MAX_CITY, MAX_NAME, MAX_STREET, ONE_LINE
from portalq.portals.payloads import Address, Model, ResponsibleParty

NO_DESIGNEE = (
    "no third-party designee: set PORTALQ_IRS_DESIGNEE_NAME, _STREET, _CITY, _STATE, _ZIP "
    "and _PHONE (the firm applying for its clients), give a third_party_designee, or "
    "say \"applicant\": \"responsible_party\" when the responsible party applies in person")


class DesigneeAddress(Address):
    """The designee's address as the IRS's Third Party page takes it: one line per field,
    of the lengths PORTALQ_IRS_DESIGNEE_* may have (jobs/settings/irs.py)."""

    street: str = Field(min_length=1, max_length=MAX_STREET, pattern=ONE_LINE)
    city: str = Field(min_length=1, max_length=MAX_CITY, pattern=ONE_LINE)
    postal_code: str = Field(min_length=3, max_length=10, pattern=ONE_LINE)


class ThirdPartyDesignee(Model):
    """Who applies for the responsible party (e.g. the formation firm): the IRS's
    third-party designee, with its own details on the application."""

    name: str = Field(min_length=1, max_length=MAX_NAME, pattern=ONE_LINE)
    address: DesigneeAddress
    phone: str = Field(pattern=r"^\+?[\d\s().-]{7,20}$")
    fax: str | None = Field(default=None, pattern=r"^\+?[\d\s().-]{7,20}$")


class ObtainEinPayload(Model):
    legal_structure: Literal["LLC", "CORPORATION", "PARTNERSHIP", "SOLE_PROPRIETOR"]
    members: int = Field(default=1, ge=1)
    state: str = Field(pattern=r"^[A-Z]{2}$")
    reason: Literal["NEW_BUSINESS", "HIRED_EMPLOYEES", "BANKING_NEEDS",
                    "CHANGING_LEGAL_STRUCTURE", "PURCHASED_BUSINESS"] = "NEW_BUSINESS"
    responsible_party: ResponsibleParty
    address: Address
    #: the county where the entity is located: the real Additional Details page requires it
    #: (tests/facts/irs-bundle-controls.txt §6); without one the IRS's own inline error stops
    #: the application there, as input the app refuses
    county: str | None = Field(default=None, min_length=1, max_length=MAX_CITY, pattern=ONE_LINE)
    phone: str = Field(pattern=r"^\+?[\d\s().-]{7,20}$")
    legal_name: str = Field(min_length=1)
    start_month: int = Field(ge=1, le=12)
    start_year: int = Field(ge=1900, le=2100)
    closing_month: int = Field(default=12, ge=1, le=12)
    expected_employees: int = Field(default=0, ge=0)
    principal_activity: str = Field(min_length=1)
    #: "responsible_party": the responsible party applies in person; "designee" or None: a
    #: third-party designee applies (this payload's or the deployment's: module docstring)
    applicant: Literal["designee", "responsible_party"] | None = None
    #: the firm applying for its client says so (the IRS's third-party designee path);
    #: filled from PORTALQ_IRS_DESIGNEE_* when the payload names neither this nor applicant
    third_party_designee: ThirdPartyDesignee | None = Field(default=None,
                                                             validate_default=True)
    #: the CP 575 letter: in the page (captured by the flow) or by mail
    letter: Literal["digital", "mail"] = "digital"

    @field_validator("third_party_designee", mode="after")
    @classmethod
    def _who_applies(cls, value: ThirdPartyDesignee | None,
                     info: ValidationInfo) -> ThirdPartyDesignee | None:
        return who_applies(value, info)


def who_applies(value: ThirdPartyDesignee | None,
                info: ValidationInfo) -> ThirdPartyDesignee | None:
    """The designee of a model with ``applicant`` declared before ``third_party_designee``
    (this payload, an order that leads to one): the one given, none when the responsible
    party applies in person, else the deployment's; refused (one line) when there is none."""
    # "applicant" is declared before this field: it is in info.data once valid
    in_person = info.data.get("applicant") == "responsible_party"
    if value is not None:
        if in_person:
            raise PydanticCustomError(
                "applicant", "\"applicant\": \"responsible_party\" applies without a "
                "third-party designee: leave out one of the two")
        return value
    if in_person or "applicant" not in info.data:
        return None   # an invalid applicant is reported on its own field
    try:
        configured = settings.current(settings.IrsDesigneeSettings).designee()
    except InputError as exc:
        raise PydanticCustomError("designee_settings", str(exc)) from None
    if configured is None:
        raise PydanticCustomError("no_designee", NO_DESIGNEE)
    return ThirdPartyDesignee.model_validate(configured)
