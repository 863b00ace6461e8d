"""Payloads and ledger helpers for the BC Registries and CRTC browser tests."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

BC = "bc_corporate_online"
CRTC = "crtc"
# a Monday, 10:00 in Vancouver
MONDAY_10_PT = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)

ANN = {"first_name": "Ann", "last_name": "Lee", "email": "ann@example.test"}
BO = {"first_name": "Bo", "last_name": "Chan"}

NAME_SEARCH: dict[str, Any] = {
    "jurisdiction": "BC", "entity_type": "BC_COMPANY",
    "names": ["Royal Cedar Holdings Ltd.", "Cedar Harbour Consulting Ltd."],
    "applicant": {"name": "Ann Lee", "email": "ann@example.test", "phone": "604-555-0100"},
}

FILE_ENTITY: dict[str, Any] = {
    "jurisdiction": "BC", "entity_type": "BC_COMPANY",
    "completing_party": ANN, "incorporators": [ANN], "directors": [ANN, BO],
    "share_classes": [{"name": "Common", "max_shares": 10000}], "agreement": "sample",
    "registered_office": {"street": "800 Hornby St", "city": "Vancouver", "region": "BC",
                          "postal_code": "V6Z 2C5", "country": "CA"},
    "contact_email": "ann@example.test", "contact_phone": "604-555-0100",
}

CRTC_PAYLOAD: dict[str, Any] = {
    "company_name": "Cedar Harbour Telecom Ltd.", "incorporation_number": "BC1234567",
    "province": "BC", "services": ["reseller", "voip"],
    "contact": {"name": "Ann Lee", "email": "ann@example.test", "phone": "604-555-0100"},
    "letter_text": "Cedar Harbour Telecom Ltd. registers as a reseller of "
                   "telecommunications services (Telecom Regulatory Policy CRTC 2017-11).",
}


def build(base: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """A copy of ``base`` with ``overrides``; an override of None removes the key."""
    payload = copy.deepcopy(base)
    for key, value in overrides.items():
        if value is None:
            payload.pop(key, None)
        else:
            payload[key] = value
    return payload


def entries(portals: Any, portal: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in portals.ledger(portal) if e["kind"] == kind]


def crash_after_checkpoint(ctx: Any, portals: Any, key: str, portal: str = BC,
                           **faults: Any) -> None:
    """Make ``ctx`` switch ``faults`` on in ``portal``'s stand-in right after the flow saves
    the checkpoint ``key`` (or, for ``"confirmed:<name>"``, confirms submission ``name``) —
    as if the attempt died there (its next page fails)."""
    from tests.checkpoints import state

    save = ctx.save_checkpoint

    def hit(data: dict[str, Any]) -> bool:
        if key.startswith("confirmed:"):
            return state(data, key.removeprefix("confirmed:")) == "confirmed"
        return key in data

    async def save_then_fail(**data: Any) -> None:
        await save(**data)
        if hit(data):
            portals.server.state[portal].faults.update(faults)

    ctx.save_checkpoint = save_then_fail
