"""An EIN application with no one to apply as, through the real CLI: refused at enqueue with
one line saying what to set, exit 2, nothing written; with the firm's designee configured the
stored job carries it (portals/irs/payload.py, jobs/settings/irs.py)."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests import payloads
from tests.conftest import run_cli
from tests.order_inputs import DELAWARE_LLC

DESIGNEE = ("NAME", "STREET", "CITY", "STATE", "ZIP", "PHONE", "FAX")


def _jobs(dsn: str) -> list[tuple[str, dict[str, object]]]:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT job_type, payload FROM portalq.job_queue ORDER BY id"
                         ).fetchall()


def _enqueue(payload: dict[str, object], order: str = "ORD-1"):
    return run_cli("enqueue", "obtain_ein", "--order", order, "--payload", json.dumps(payload))


def _one_line(out, needle: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("portalq: error: "), out.stderr
    assert needle in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_no_designee_configured_nor_given_is_refused_and_writes_nothing(
        db, dsn, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in DESIGNEE:
        monkeypatch.delenv(f"PORTALQ_IRS_DESIGNEE_{name}", raising=False)
    _one_line(_enqueue(payloads.OBTAIN_EIN),
              "invalid obtain_ein payload: third_party_designee: no third-party designee: "
              "set PORTALQ_IRS_DESIGNEE_NAME, _STREET, _CITY, _STATE, _ZIP and _PHONE")
    out = run_cli("enqueue-order", "delaware_llc", "--order", "ORD-2", "--input",
                  json.dumps(DELAWARE_LLC))
    _one_line(out, "no third-party designee: set PORTALQ_IRS_DESIGNEE_NAME")
    assert _jobs(dsn) == []
    # the responsible party applying in person is the payload's explicit choice
    out = _enqueue({**payloads.OBTAIN_EIN, "applicant": "responsible_party"}, order="ORD-3")
    assert out.returncode == 0, out.stderr
    [(job_type, stored)] = _jobs(dsn)
    assert job_type == "obtain_ein" and stored["applicant"] == "responsible_party"
    assert "third_party_designee" not in stored


def test_a_half_configured_designee_names_what_is_missing(
        db, dsn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PORTALQ_IRS_DESIGNEE_PHONE")
    _one_line(_enqueue(payloads.OBTAIN_EIN),
              "the IRS third-party designee is incomplete: set PORTALQ_IRS_DESIGNEE_PHONE too")
    assert _jobs(dsn) == []


def test_the_configured_designee_is_written_into_the_job(db, dsn) -> None:
    out = _enqueue(payloads.OBTAIN_EIN)
    assert out.returncode == 0, out.stderr
    [(_, stored)] = _jobs(dsn)
    # tests/conftest.py configures the test deployment's firm
    assert stored["third_party_designee"]["name"] == "Test Formation Partners LLC"
    assert stored["third_party_designee"]["fax"] == "302-555-0178"
