"""The demo's sample orders: one of every job type, one business error, one whose answer is
lost after the click (the CRTC portal starts answering 500: it waits, then asks a person),
one for a portal closed at start-up."""

from __future__ import annotations

from typing import Any

_PERSON = {"first_name": "Mei", "last_name": "Tanaka", "email": "mei@example.com"}
_BC_OFFICE = {"street": "555 Burrard St", "city": "Vancouver", "region": "BC",
              "postal_code": "V7X 1M8", "country": "CA"}
_DE_OFFICE = {"street": "1209 Orange St", "city": "Wilmington", "region": "DE",
              "postal_code": "19801"}
_APPLICANT = {"name": "Mei Tanaka", "email": "mei@example.com", "phone": "604-555-0142"}


def samples() -> dict[str, tuple[str, str, dict[str, Any]]]:
    """key -> (job type, order id, payload)."""
    return {
        "name": ("name_search", "ORD-1001", {
            "names": ["Northern Lights Widgets Ltd.", "Northern Lights Gadgets Ltd."],
            "applicant": _APPLICANT}),
        "name_rejected": ("name_search", "ORD-1002", {
            "names": ["Royal Crown Holdings Ltd."], "applicant": _APPLICANT}),
        "bc_company": ("file_entity", "ORD-1003", {
            "jurisdiction": "BC", "entity_type": "BC_COMPANY", "completing_party": _PERSON,
            "incorporators": [_PERSON], "directors": [_PERSON],
            "share_classes": [{"name": "Common", "max_shares": 10000}],
            "registered_office": _BC_OFFICE, "contact_email": "mei@example.com",
            "contact_phone": "604-555-0142"}),
        "delaware": ("file_entity", "ORD-1004", {
            "jurisdiction": "DE", "entity_type": "LLC", "legal_name": "Tanaka Robotics LLC",
            "completing_party": _PERSON, "registered_office": _DE_OFFICE,
            "registered_agent": "The Corporation Trust Company",
            "contact_email": "mei@example.com", "contact_phone": "302-555-0199"}),
        "ein": ("obtain_ein", "ORD-1004", {
            "legal_structure": "LLC", "members": 1, "state": "DE", "reason": "NEW_BUSINESS",
            "responsible_party": {"first_name": "Mei", "last_name": "Tanaka",
                                  "ssn": "512-34-8890"},
            "address": _DE_OFFICE, "phone": "302-555-0199", "legal_name": "Tanaka Robotics LLC",
            "start_month": 12, "start_year": 2026, "principal_activity": "Robotics software",
            # in person: the IRS gives the CP 575 online only then (a designee's is posted),
            # and the delivery below sends it
            "applicant": "responsible_party"}),
        "crtc": ("process_crtc", "ORD-1005", {
            "company_name": "Northern Lights Telecom Ltd.", "incorporation_number": "BC1300042",
            "province": "BC", "services": ["reseller"],
            "contact": {"name": "Mei Tanaka", "email": "mei@example.com",
                        "phone": "604-555-0142"},
            "letter_text": "Northern Lights Telecom Ltd. registers as a reseller of "
                           "telecommunications services under Telecom Regulatory Policy "
                           "CRTC 2017-11."}),
        "deliver": ("deliver", "ORD-1004", {
            "to": "mei@example.com", "subject": "Your EIN confirmation (CP 575)",
            "documents": [{"source_job_id": 1}]}),
        "crtc_down": ("process_crtc", "ORD-1006", {
            "company_name": "Prairie Voice Inc.", "province": "AB", "services": ["voip"],
            "contact": {"name": "Sam Lee", "email": "sam@example.com", "phone": "403-555-0100"},
            "letter_text": "Prairie Voice Inc. registers as a VoIP provider.",
            "registration_lists": ["Reseller of Telecommunications Services"]}),
    }
