"""What ``name_search`` carries: a BC Name Request's names and applicant."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from portalq.portals.payloads import Model


class Applicant(Model):
    name: str = Field(min_length=1)
    email: str
    phone: str = Field(pattern=r"^\+?[\d\s().-]{7,20}$")


class NameSearchPayload(Model):
    jurisdiction: Literal["BC"] = "BC"
    names: list[Annotated[str, Field(min_length=1, max_length=150)]] = Field(
        min_length=1, max_length=3, description="up to 3, in order of preference")
    entity_type: Literal["BC_COMPANY", "ULC"] = "BC_COMPANY"
    applicant: Applicant
