"""What the built-in job types carry: payload schemas of the portals portalq knows.

They are the portals' business, not the queue's: :mod:`portals.catalogue` declares a job
type for each; a flow gets its instance as ``ctx.args`` (``FlowContext[Payload]``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_DIGITS9 = r"^\d{3}-?\d{2}-?\d{4}$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Address(_Model):
    street: str = Field(min_length=1)
    city: str = Field(min_length=1)
    region: str = Field(min_length=2, description="state or province code")
    postal_code: str = Field(min_length=3)
    country: str = "US"


class Person(_Model):
    first_name: str = Field(min_length=1)
    middle_name: str | None = None
    last_name: str = Field(min_length=1)
    email: str | None = None
    address: Address | None = None


class ResponsibleParty(Person):
    suffix: str | None = None
    ssn: str | None = Field(default=None, pattern=_DIGITS9, repr=False)
    itin: str | None = Field(default=None, pattern=_DIGITS9, repr=False)

    @model_validator(mode="after")
    def _one_id(self) -> ResponsibleParty:
        if not self.ssn and not self.itin:
            raise ValueError("the responsible party needs an SSN or an ITIN")
        return self

    def tax_id(self) -> str:
        return self.ssn or self.itin or ""


class ShareClass(_Model):
    name: str = Field(min_length=1)
    max_shares: int | None = Field(default=None, gt=0)


class FileEntityPayload(_Model):
    jurisdiction: Literal["BC", "DE"]
    entity_type: Literal["BC_COMPANY", "ULC", "LLC", "CORPORATION"]
    legal_name: str | None = Field(default=None, description="None: a numbered company (BC)")
    nr_number: str | None = Field(default=None, pattern=r"^NR ?\d{7}$")
    #: a CONDITIONAL name request may be used once its consent letter is in hand
    nr_consent_received: bool = False
    completing_party: Person
    incorporators: list[Person] = Field(default_factory=list)
    directors: list[Person] = Field(default_factory=list)
    share_classes: list[ShareClass] = Field(default_factory=list)
    agreement: Literal["sample", "custom"] = "sample"
    registered_office: Address
    registered_agent: str | None = None
    contact_email: str
    contact_phone: str = Field(pattern=r"^\+?[\d\s().-]{7,20}$")

    @model_validator(mode="after")
    def _entity_type_fits_jurisdiction(self) -> FileEntityPayload:
        allowed = {"BC": ("BC_COMPANY", "ULC"), "DE": ("LLC", "CORPORATION")}[self.jurisdiction]
        if self.entity_type not in allowed:
            raise ValueError(f"a {self.jurisdiction} filing is one of {', '.join(allowed)}, "
                             f"not {self.entity_type}")
        return self


class ThirdPartyDesignee(_Model):
    """Who applies for the responsible party (e.g. the formation firm): the IRS's
    third-party designee, with its own details on the application."""

    name: str = Field(min_length=1)
    address: Address
    phone: str = Field(pattern=r"^\+?[\d\s().-]{7,20}$")
    fax: str | None = Field(default=None, pattern=r"^\+?[\d\s().-]{7,20}$")


class ObtainEinPayload(_Model):
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


class Applicant(_Model):
    name: str = Field(min_length=1)
    email: str
    phone: str = Field(pattern=r"^\+?[\d\s().-]{7,20}$")


class NameSearchPayload(_Model):
    jurisdiction: Literal["BC"] = "BC"
    names: list[Annotated[str, Field(min_length=1, max_length=150)]] = Field(
        min_length=1, max_length=3, description="up to 3, in order of preference")
    entity_type: Literal["BC_COMPANY", "ULC"] = "BC_COMPANY"
    applicant: Applicant


class CrtcContact(_Model):
    name: str = Field(min_length=1)
    email: str
    phone: str = Field(pattern=r"^\+?[\d\s().-]{7,20}$")


#: the CRTC's registration lists (crtc.gc.ca/eng/comm/telecom/registr2.htm)
CrtcList = Literal[
    "Reseller of Telecommunications Services", "Reseller of High-Speed Retail Internet Services",
    "BITS Licensee", "PCLEC", "CLEC", "Non-Dominant Carrier", "Wireless Carrier", "CPTSP",
    "DSL Provider", "Proposed Full MVNO", "Full MVNO"]


class ProcessCrtcPayload(_Model):
    company_name: str = Field(min_length=1)
    incorporation_number: str | None = None
    province: str = Field(pattern=r"^[A-Z]{2}$")
    services: list[Literal["reseller", "voip", "long_distance", "internet"]] = Field(
        default=["reseller"], min_length=1)
    contact: CrtcContact
    letter_text: str = Field(min_length=1)
    #: the registration letter's content besides ``letter_text``: the address, facilities
    #: or not, the lists (default from ``services``: reseller and internet map to the two
    #: reseller lists)
    address: Address | None = None
    facilities_based: bool = False
    registration_lists: list[CrtcList] = Field(default_factory=list)


class DocumentRef(_Model):
    source_job_id: int = Field(gt=0, le=2**63 - 1,
                               description="the job whose stored documents to send")
    name: str | None = Field(default=None, description="only this document (default: all)")


class DeliverPayload(_Model):
    to: str = Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    subject: str = "Your documents"
    body: str = "Please find your documents attached."
    documents: list[DocumentRef] = Field(min_length=1)
