"""Valid sample payloads for every built-in job type (shared by the tests)."""

from __future__ import annotations

from typing import Any

ADDRESS = {"street": "1 Main St", "city": "Dover", "region": "DE", "postal_code": "19901"}
PERSON = {"first_name": "Ada", "last_name": "Lovelace", "email": "ada@example.com"}

NAME_SEARCH: dict[str, Any] = {
    "names": ["Maple Leaf Widgets Ltd."],
    "applicant": {"name": "Ada Lovelace", "email": "ada@example.com", "phone": "604-555-0100"},
}

OBTAIN_EIN: dict[str, Any] = {
    "legal_structure": "LLC", "members": 1, "state": "DE", "reason": "NEW_BUSINESS",
    "responsible_party": {"first_name": "Ada", "last_name": "Lovelace", "ssn": "123-45-6789"},
    "address": ADDRESS, "phone": "302-555-0100", "legal_name": "Widgets LLC",
    "start_month": 11, "start_year": 2026, "principal_activity": "Software",
}

FILE_ENTITY_BC: dict[str, Any] = {
    "jurisdiction": "BC", "entity_type": "BC_COMPANY", "legal_name": "Maple Leaf Widgets Ltd.",
    "completing_party": PERSON, "incorporators": [PERSON],
    "directors": [PERSON], "share_classes": [{"name": "Common", "max_shares": 10000}],
    "registered_office": {**ADDRESS, "city": "Vancouver", "region": "BC",
                          "postal_code": "V6B 1A1", "country": "CA"},
    "contact_email": "ada@example.com", "contact_phone": "604-555-0100",
}

FILE_ENTITY_DE: dict[str, Any] = {
    "jurisdiction": "DE", "entity_type": "LLC", "legal_name": "Widgets LLC",
    "completing_party": PERSON, "registered_office": ADDRESS,
    "registered_agent": "Delaware Registered Agents Inc.",
    "contact_email": "ada@example.com", "contact_phone": "302-555-0100",
}

PROCESS_CRTC: dict[str, Any] = {
    "company_name": "Maple Leaf Telecom Ltd.", "incorporation_number": "BC1234567",
    "province": "BC", "services": ["reseller"],
    "contact": {"name": "Ada Lovelace", "email": "ada@example.com", "phone": "604-555-0100"},
    "letter_text": "We register as a reseller of telecommunications services.",
}

DELIVER: dict[str, Any] = {"to": "customer@example.com", "documents": [{"source_job_id": 1}]}

ALL = {
    "name_search": NAME_SEARCH, "obtain_ein": OBTAIN_EIN, "file_entity": FILE_ENTITY_BC,
    "process_crtc": PROCESS_CRTC, "deliver": DELIVER,
}
