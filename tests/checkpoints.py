"""Checkpoints as the submission protocol writes them (jobs/submission.py), for tests."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from portalq.jobs import submission

AT = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)


def in_doubt(name: str = "filing", reference: str = "PQ1-FIL-abc123") -> dict[str, Any]:
    """A checkpoint whose submission ``name`` was pressed and never confirmed."""
    return submission.started({}, name, reference, AT)


def state(checkpoint: Mapping[str, Any] | None, name: str) -> str | None:
    """The state of submission ``name`` ("submitting", "confirmed", ...) or None."""
    rec = submission.records(checkpoint).get(name)
    return str(rec.state) if rec else None


def record(checkpoint: Mapping[str, Any] | None, name: str) -> submission.Record:
    return submission.records(checkpoint)[name]
