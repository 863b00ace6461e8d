"""The firm's third-party designee for the IRS's EIN application (``PORTALQ_IRS_DESIGNEE_*``).

A formation firm applying for its clients is the IRS's *third-party designee* and must say so
on the application (``docs/portals/irs.md``, "Who applies"). The deployment names the
firm once here; an ``obtain_ein`` job that names no designee and does not say the responsible
party applies in person applies as this one (portals/irs/payload.py). All of the designee or
none of it: a half-configured designee is refused when the settings are read, and so is a
setting that is not one line of a bounded length (issue 48: a line break or 10,000
characters went into every EIN payload).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from portalq.jobs.settings.section import Section

#: a phone number, or empty (unset)
_PHONE_OR_EMPTY = r"^(\+?[\d\s().-]{7,20})?$"
#: one line of text: no control character, no line or paragraph break (each setting goes
#: into every EIN payload, and onto the IRS's form, as one field)
ONE_LINE = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$"
#: the longest each may be (the lengths the payload's designee takes: portals/irs/payload.py)
MAX_NAME, MAX_STREET, MAX_CITY = 100, 100, 60
#: a US ZIP code (the designee's state is a US state), or empty (unset)
_ZIP_OR_EMPTY = r"^(\d{5}(-\d{4})?)?$"
#: the fields a designee needs (the IRS app's Third Party page requires them; fax is optional)
REQUIRED = ("irs_designee_name", "irs_designee_street", "irs_designee_city",
            "irs_designee_state", "irs_designee_zip", "irs_designee_phone")


class IrsDesigneeSettings(Section):
    title: ClassVar[str] = "IRS third-party designee"

    irs_designee_name: str = Field("", max_length=MAX_NAME,
                                   description="the firm that applies for EINs as its "
                                   "clients' third-party designee (the IRS's Third Party "
                                   "page); set it and the address and phone below, or none of "
                                   "them: an obtain_ein job without a designee of its own and "
                                   "without \"applicant\": \"responsible_party\" is then "
                                   "refused at enqueue (one line, at most 100 characters)")
    irs_designee_street: str = Field("", max_length=MAX_STREET,
                                     description="the designee's street address (one line, at most "
                                     "100 characters)")
    irs_designee_city: str = Field("", max_length=MAX_CITY,
                                   description="the designee's city (one line, at most 60 "
                                   "characters)")
    irs_designee_state: str = Field("", pattern=r"^([A-Z]{2})?$",
                                    description="the designee's state (two capital letters, "
                                    "e.g. DE)")
    irs_designee_zip: str = Field("", pattern=_ZIP_OR_EMPTY,
                                  description="the designee's ZIP code (12345 or 12345-6789)")
    irs_designee_phone: str = Field("", pattern=_PHONE_OR_EMPTY,
                                    description="the designee's phone number")
    irs_designee_fax: str = Field("", pattern=_PHONE_OR_EMPTY,
                                  description="the designee's fax number (optional)")

    @field_validator("irs_designee_name", "irs_designee_street", "irs_designee_city")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if not re.fullmatch(ONE_LINE, value):
            raise ValueError("must be one line (no line break or control character)")
        return value

    @model_validator(mode="after")
    def _all_or_none(self) -> IrsDesigneeSettings:
        names = self.env_names()
        given = [f for f in (*REQUIRED, "irs_designee_fax") if getattr(self, f).strip()]
        missing = [names[f] for f in REQUIRED if not getattr(self, f).strip()]
        if given and missing:
            raise ValueError(f"the IRS third-party designee is incomplete: set "
                             f"{', '.join(missing)} too, or unset every PORTALQ_IRS_DESIGNEE_*")
        return self

    def designee(self) -> dict[str, Any] | None:
        """The designee as ``obtain_ein``'s payload names one; None when none is configured."""
        if not self.irs_designee_name.strip():
            return None
        out: dict[str, Any] = {
            "name": self.irs_designee_name,
            "address": {"street": self.irs_designee_street, "city": self.irs_designee_city,
                        "region": self.irs_designee_state,
                        "postal_code": self.irs_designee_zip},
            "phone": self.irs_designee_phone}
        if self.irs_designee_fax.strip():
            out["fax"] = self.irs_designee_fax
        return out
