"""The parts the built-in portals' payloads share: addresses, people, share classes.

Each portal's own payload model is in its folder (``portals/irs/payload.py`` ...); the
payloads are the portals' business, not the queue's: each portal's ``portal.py`` declares a job
type for its model, and a flow gets its instance as ``ctx.args`` (``FlowContext[Payload]``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: a phone number as the portals take it
PHONE = r"^\+?[\d\s().-]{7,20}$"

_DIGITS9 = r"^\d{3}-?\d{2}-?\d{4}$"


class Model(BaseModel):
    """A payload model: no unknown fields, surrounding spaces stripped."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Address(Model):
    street: str = Field(min_length=1)
    city: str = Field(min_length=1)
    region: str = Field(min_length=2, description="state or province code")
    postal_code: str = Field(min_length=3)
    country: str = "US"


class Person(Model):
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


class ShareClass(Model):
    name: str = Field(min_length=1)
    max_shares: int | None = Field(default=None, gt=0)
