"""portalq's own order kinds (issue 41), declared beside its job types the way a plugin
declares its own (jobs/business/pipelines.py):

- ``delaware_llc``: file the LLC with Delaware, apply for its EIN with the name as filed,
  mail the certificate and the CP 575;
- ``bc_company``: reserve the name in BC, incorporate with the approved name request, mail
  the certificate.

Each step's payload is built from the order's input and the results of the steps before it;
the job type validates it and seals its secret fields, as any enqueue does.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import time
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from portalq.jobs.business.pipelines import (
    Deadline,
    OrderKind,
    Step,
    StepResult,
    register_order_kind,
)
from portalq.portals.bc.payload import Applicant
from portalq.portals.irs.payload import ThirdPartyDesignee, who_applies
from portalq.portals.payloads import Address, Person, ResponsibleParty, ShareClass
from portalq.portals.payloads import Model as _Model

_EMAIL = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
_PHONE = r"^\+?[\d\s().-]{7,20}$"
Done = Mapping[str, StepResult]

#: how long an approved name stays reserved, in days (docs/portals/sources.md, with the
#: public sources): a filing that uses the reservation must be in before it expires
NAME_RESERVATION_DAYS = {"bc_corporate_online": 56, "delaware_icis": 120}
#: Delaware gives a filing received by 22:30 ET that day's date (31 December matters for
#: tax years)
DE_SAME_DAY = Deadline("Delaware's 22:30 ET cut-off for the order's filing date",
                       cutoff=time(22, 30), timezone="America/New_York")


class DelawareLlcInput(_Model):
    legal_name: str = Field(min_length=1)
    completing_party: Person
    registered_office: Address
    registered_agent: str | None = None
    contact_email: str = Field(pattern=_EMAIL)
    contact_phone: str = Field(pattern=_PHONE)
    #: the EIN application
    responsible_party: ResponsibleParty
    members: int = Field(default=1, ge=1)
    principal_activity: str = Field(min_length=1)
    start_month: int = Field(ge=1, le=12)
    start_year: int = Field(ge=1900, le=2100)
    business_address: Address | None = Field(default=None,
                                              description="default: the registered office")
    #: who applies for the EIN (portals/irs/payload.py): the designee named here, else the
    #: deployment's (PORTALQ_IRS_DESIGNEE_*); "responsible_party": the client in person
    applicant: Literal["designee", "responsible_party"] | None = None
    #: checked (and filled from the settings) when the order comes in, not when the EIN
    #: step's turn comes after the filing: an order that cannot apply is refused at once
    third_party_designee: ThirdPartyDesignee | None = Field(default=None,
                                                             validate_default=True)
    #: where the documents go (default: contact_email)
    deliver_to: str | None = Field(default=None, pattern=_EMAIL)


    _who_applies = field_validator("third_party_designee")(who_applies)


def _documents(done: Done, *steps: str) -> list[dict[str, Any]]:
    """A document reference per step that stored documents."""
    return [{"source_job_id": done[s].job_id} for s in steps
            if s in done and done[s].result.get("documents")]


def _de_filing(o: DelawareLlcInput, done: Done) -> dict[str, Any]:
    return {"jurisdiction": "DE", "entity_type": "LLC", "legal_name": o.legal_name,
            "completing_party": o.completing_party.model_dump(exclude_none=True),
            "registered_office": o.registered_office.model_dump(exclude_none=True),
            "registered_agent": o.registered_agent, "contact_email": o.contact_email,
            "contact_phone": o.contact_phone}


def _de_ein(o: DelawareLlcInput, done: Done) -> dict[str, Any]:
    filed = done["file_entity"].result
    address = o.business_address or o.registered_office
    return {"legal_structure": "LLC", "members": o.members, "state": "DE",
            # the name as Delaware filed it, not as the order typed it
            "legal_name": filed.get("entity_name") or o.legal_name,
            "responsible_party": o.responsible_party.model_dump(exclude_none=True),
            "address": address.model_dump(exclude_none=True), "phone": o.contact_phone,
            "start_month": o.start_month, "start_year": o.start_year,
            "principal_activity": o.principal_activity, "applicant": o.applicant,
            "third_party_designee": (o.third_party_designee.model_dump(exclude_none=True)
                                     if o.third_party_designee else None)}


def _de_deliver(o: DelawareLlcInput, done: Done) -> dict[str, Any]:
    return {"to": o.deliver_to or o.contact_email,
            "subject": f"{done['obtain_ein'].result.get('legal_name') or o.legal_name}: "
                       "certificate of formation and EIN confirmation (CP 575)",
            "documents": _documents(done, "file_entity", "obtain_ein")}


register_order_kind(OrderKind(
    "delaware_llc", DelawareLlcInput,
    steps=(Step("file_entity", "file_entity", _de_filing, portal="delaware_icis",
                deadline=DE_SAME_DAY),
           Step("obtain_ein", "obtain_ein", _de_ein, after=("file_entity",)),
           Step("deliver", "deliver", _de_deliver, after=("file_entity", "obtain_ein"))),
    secret_fields=("responsible_party.ssn", "responsible_party.itin")))


class BcCompanyInput(_Model):
    names: list[Annotated[str, Field(min_length=1, max_length=150)]] = Field(
        min_length=1, max_length=3, description="up to 3, in order of preference")
    applicant: Applicant
    completing_party: Person
    incorporators: list[Person] = Field(default_factory=list)
    directors: list[Person] = Field(min_length=1)
    share_classes: list[ShareClass] = Field(min_length=1)
    registered_office: Address
    contact_email: str = Field(pattern=_EMAIL)
    contact_phone: str = Field(pattern=_PHONE)
    deliver_to: str | None = Field(default=None, pattern=_EMAIL)


def _bc_names(o: BcCompanyInput, done: Done) -> dict[str, Any]:
    return {"names": list(o.names), "entity_type": "BC_COMPANY",
            "applicant": o.applicant.model_dump(exclude_none=True)}


def _bc_filing(o: BcCompanyInput, done: Done) -> dict[str, Any]:
    nr = done["name_search"].result
    return {"jurisdiction": "BC", "entity_type": "BC_COMPANY", "legal_name": nr.get("name"),
            "nr_number": nr.get("nr_number"),
            "completing_party": o.completing_party.model_dump(exclude_none=True),
            "incorporators": [p.model_dump(exclude_none=True) for p in o.incorporators],
            "directors": [p.model_dump(exclude_none=True) for p in o.directors],
            "share_classes": [c.model_dump(exclude_none=True) for c in o.share_classes],
            "registered_office": o.registered_office.model_dump(exclude_none=True),
            "contact_email": o.contact_email, "contact_phone": o.contact_phone}


def _bc_deliver(o: BcCompanyInput, done: Done) -> dict[str, Any]:
    return {"to": o.deliver_to or o.contact_email,
            "subject": f"{done['file_entity'].result.get('legal_name') or o.names[0]}: "
                       "certificate of incorporation",
            "documents": _documents(done, "file_entity")}


register_order_kind(OrderKind(
    "bc_company", BcCompanyInput,
    steps=(Step("name_search", "name_search", _bc_names),
           Step("file_entity", "file_entity", _bc_filing, after=("name_search",),
                portal="bc_corporate_online",
                deadline=Deadline("the name reservation's expiry",
                                  after="name_search",
                                  days=NAME_RESERVATION_DAYS["bc_corporate_online"])),
           Step("deliver", "deliver", _bc_deliver, after=("file_entity",)))))
