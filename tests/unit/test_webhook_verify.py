"""``webhooks.verify``, the receivers' check, on headers it did not write: a signature that
is not ASCII is a wrong signature (False), not an error (issue 48 #4)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from portalq.jobs.business import webhooks

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
NOW = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)


def headers(signature: str) -> dict[str, str]:
    return {"webhook-id": "msg_1", "webhook-timestamp": str(int(NOW.timestamp())),
            "webhook-signature": signature}


def test_a_non_ascii_signature_is_refused_not_an_error():
    assert webhooks.verify(SECRET, headers("v1,é"), b"{}", now=NOW) is False
    assert webhooks.verify(SECRET, headers("v1,\udcff"), b"{}", now=NOW) is False


def test_a_good_signature_among_non_ascii_ones_verifies():
    good = webhooks.sign(SECRET, "msg_1", int(NOW.timestamp()), b"{}")
    assert webhooks.verify(SECRET, headers(f"v1,é {good}"), b"{}", now=NOW) is True
    assert webhooks.verify(SECRET, headers("v1,é"), b"{}", now=NOW) is False
