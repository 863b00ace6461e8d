"""Valid sample inputs of the built-in order kinds (portals/order_kinds.py)."""

from __future__ import annotations

from typing import Any

from tests.payloads import ADDRESS, FILE_ENTITY_BC, NAME_SEARCH, PERSON

DELAWARE_LLC: dict[str, Any] = {
    "legal_name": "Widgets LLC", "completing_party": PERSON, "registered_office": ADDRESS,
    "registered_agent": "Delaware Registered Agents Inc.",
    "contact_email": "ada@example.com", "contact_phone": "302-555-0100",
    "responsible_party": {"first_name": "Ada", "last_name": "Lovelace", "ssn": "123-45-6789"},
    "principal_activity": "Software", "start_month": 11, "start_year": 2026,
}

BC_COMPANY: dict[str, Any] = {
    "names": NAME_SEARCH["names"], "applicant": NAME_SEARCH["applicant"],
    **{k: FILE_ENTITY_BC[k] for k in ("completing_party", "incorporators", "directors",
                                      "share_classes", "registered_office", "contact_email",
                                      "contact_phone")},
}
