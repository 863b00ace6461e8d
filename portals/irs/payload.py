"""What ``obtain_ein`` carries: the IRS's Apply for EIN questions, answered."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from portalq.portals.payloads import Address, Model, ResponsibleParty


class ThirdPartyDesignee(Model):
    """Who applies for the responsible party (e.g. the formation firm): the IRS's
    third-party designee, with its own details on the application."""

    name: str = Field(min_length=1)
    address: Address
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
    phone: str = Field(pattern=r"^\+?[\d\s().-]{7,20}$")
    legal_name: str = Field(min_length=1)
    start_month: int = Field(ge=1, le=12)
    start_year: int = Field(ge=1900, le=2100)
    closing_month: int = Field(default=12, ge=1, le=12)
    expected_employees: int = Field(default=0, ge=0)
    principal_activity: str = Field(min_length=1)
    #: the firm applying for its client says so (the IRS's third-party designee path);
    #: None: the responsible party applies in person
    third_party_designee: ThirdPartyDesignee | None = None
    #: the CP 575 letter: in the page (captured by the flow) or by mail
    letter: Literal["digital", "mail"] = "digital"
