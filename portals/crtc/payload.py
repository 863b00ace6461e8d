"""What ``process_crtc`` carries: the registration and its letter's content."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from portalq.portals.payloads import Address, Model


class CrtcContact(Model):
    name: str = Field(min_length=1)
    email: str
    phone: str = Field(pattern=r"^\+?[\d\s().-]{7,20}$")


#: the CRTC's registration lists (crtc.gc.ca/eng/comm/telecom/registr2.htm)
CrtcList = Literal[
    "Reseller of Telecommunications Services", "Reseller of High-Speed Retail Internet Services",
    "BITS Licensee", "PCLEC", "CLEC", "Non-Dominant Carrier", "Wireless Carrier", "CPTSP",
    "DSL Provider", "Proposed Full MVNO", "Full MVNO"]


class ProcessCrtcPayload(Model):
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
