"""Job types: payload schemas, portal routing, per-key rate limits; a public registry.

Users add their own job type with :func:`register`::

    class Payload(BaseModel): ...
    register(JobType("renew_license", Payload, portal="state_registry"))

and a handler for it on the service side (``scheduler.handlers.register_handler``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from jobs.errors import InputError

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


class ProcessCrtcPayload(_Model):
    company_name: str = Field(min_length=1)
    incorporation_number: str | None = None
    province: str = Field(pattern=r"^[A-Z]{2}$")
    services: list[Literal["reseller", "voip", "long_distance", "internet"]] = Field(
        default=["reseller"], min_length=1)
    contact: CrtcContact
    letter_text: str = Field(min_length=1)


class DocumentRef(_Model):
    source_job_id: int = Field(gt=0, le=2**63 - 1,
                               description="the job whose stored documents to send")
    name: str | None = Field(default=None, description="only this document (default: all)")


class DeliverPayload(_Model):
    to: str = Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    subject: str = "Your documents"
    body: str = "Please find your documents attached."
    documents: list[DocumentRef] = Field(min_length=1)


@dataclass(frozen=True)
class RateLimit:
    """At most ``limit`` jobs per ``key`` per portal day (the portal's own calendar day)."""

    key: Callable[[Mapping[str, Any]], str]
    limit: int = 1
    period: Literal["portal_day"] = "portal_day"


@dataclass(frozen=True)
class JobType:
    name: str
    payload_model: type[BaseModel]
    #: a portal code, or a function of the validated payload giving one
    portal: str | Callable[[BaseModel], str]
    rate_limit: RateLimit | None = None
    #: False: after a crash past the point of no return the portal offers no lookup, so the
    #: job goes to a human instead of back to the queue (e.g. the IRS EIN Assistant)
    reconcilable: bool = True
    #: fields never shown in logs, errors or emails; sealed at rest (jobs/secrets_at_rest.py)
    secret_fields: tuple[str, ...] = ()
    #: checkpoint keys whose values are personal data or capabilities: sealed at rest too
    secret_checkpoints: tuple[str, ...] = ()
    #: portals a caller may name instead of :meth:`portal_for`'s (default: none; e.g. a
    #: test or sandbox copy of the portal). Any other explicit portal is an input error:
    #: an EIN request sent to the CRTC would also escape the IRS's per-day limit.
    other_portals: tuple[str, ...] = ()

    def portal_for(self, payload: BaseModel) -> str:
        return self.portal(payload) if callable(self.portal) else self.portal

    def choose_portal(self, payload: BaseModel, requested: str | None) -> str:
        """The portal a job goes to: ``requested`` if this type allows it (InputError if
        not), else the type's own for this payload."""
        own = self.portal_for(payload)
        if requested is None or requested == own or requested in self.other_portals:
            return own if requested is None else requested
        allowed = ", ".join((own, *self.other_portals))
        raise InputError(f"{self.name} jobs go to portal {allowed}, not {requested!r}")


_REGISTRY: dict[str, JobType] = {}


def register(job_type: JobType) -> JobType:
    _REGISTRY[job_type.name] = job_type
    return job_type


def get(name: str) -> JobType:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise InputError(f"unknown job type {name!r} (known: {known})") from None


def names() -> list[str]:
    return sorted(_REGISTRY)


def parse_payload(job_type: str, payload: Any) -> tuple[JobType, BaseModel]:
    """Validate ``payload`` against the type's schema: (type, the payload's model)."""
    jt = get(job_type)
    if not isinstance(payload, Mapping):
        raise InputError(f"{job_type} payload must be a JSON object")
    try:
        return jt, jt.payload_model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "payload"
        raise InputError(
            f"invalid {job_type} payload: {where}: {first['msg']}"
            + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")
        ) from None


def normalised(model: BaseModel) -> dict[str, Any]:
    """The payload as stored: JSON types, unset optional fields left out."""
    return model.model_dump(mode="json", exclude_none=True)


def validate_payload(job_type: str, payload: Any) -> tuple[JobType, dict[str, Any], str]:
    """Validate ``payload`` against the type's schema: (type, normalised payload, portal)."""
    jt, model = parse_payload(job_type, payload)
    return jt, normalised(model), jt.portal_for(model)


def _entity_portal(p: BaseModel) -> str:
    return {"BC": "bc_corporate_online", "DE": "delaware_icis"}[p.jurisdiction]  # type: ignore[attr-defined]


register(JobType("file_entity", FileEntityPayload, _entity_portal))
register(JobType(
    "obtain_ein", ObtainEinPayload, "irs_ein",
    reconcilable=False,
    rate_limit=RateLimit(key=lambda p: p["responsible_party"].get("ssn")
                         or p["responsible_party"].get("itin", "")),
    secret_fields=("responsible_party.ssn", "responsible_party.itin"),
    # the CP 575 link opens the letter (name, address, EIN) for whoever holds it
    secret_checkpoints=("cp575_url",),
))
register(JobType("name_search", NameSearchPayload, "bc_corporate_online"))
register(JobType("process_crtc", ProcessCrtcPayload, "crtc"))
register(JobType("deliver", DeliverPayload, "email"))

__all__ = ["JobType", "RateLimit", "register", "get", "names", "parse_payload", "normalised",
           "validate_payload"]
