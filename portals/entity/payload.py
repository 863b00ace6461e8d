"""What ``file_entity`` carries, whichever jurisdiction files it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from portalq.portals.payloads import Address, Model, Person, ShareClass


class FileEntityPayload(Model):
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
