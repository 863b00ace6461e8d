"""``portalq enqueue-order`` and ``portalq orders cancel`` as an operator types them
(issue 41): the built-in kinds, one-line errors that write nothing, the audit row."""

from __future__ import annotations

import json

import psycopg

from tests.conftest import run_cli
from tests.order_inputs import BC_COMPANY, DELAWARE_LLC


def _rows(dsn):
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT job_type, portal, status FROM portalq.job_queue "
                         "ORDER BY id").fetchall()


def test_enqueue_order_creates_the_whole_delaware_llc(db, dsn, tmp_path):
    path = tmp_path / "order.json"
    path.write_text(json.dumps(DELAWARE_LLC))
    out = run_cli("enqueue-order", "delaware_llc", "--order", "ORD-1001", "--input-file",
                  str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["ORD-1001 file_entity: job 1 (pending)",
                                       "ORD-1001 obtain_ein: job 2 (held)",
                                       "ORD-1001 deliver: job 3 (held)"]
    assert _rows(dsn) == [("file_entity", "delaware_icis", "pending"),
                          ("obtain_ein", "irs_ein", "deferred"),
                          ("deliver", "email", "deferred")]
    out = run_cli("enqueue-order", "bc_company", "--order", "ORD-1002", "--input",
                  json.dumps(BC_COMPANY), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["started"] == ["name_search"]


def test_bad_orders_are_one_line_errors_that_write_nothing(db, dsn, tmp_path):
    path = tmp_path / "order.json"
    path.write_text(json.dumps({**DELAWARE_LLC, "responsible_party": {"first_name": "A",
                                                                       "last_name": "B"}}))
    cases = [
        (("no_such", "--order", "ORD-1", "--input", "{}"), "unknown order kind 'no_such'"),
        (("delaware_llc", "--order", "ORD-1", "--input-file", str(path)),
         "invalid delaware_llc order input: responsible_party"),
        (("delaware_llc", "--order", "ORD-1", "--input", "[1]"), "must be a JSON object"),
        (("delaware_llc", "--order", "ORD-1"), "give --input-file or --input"),
    ]
    for args, message in cases:
        out = run_cli("enqueue-order", *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
    assert _rows(dsn) == []


def test_orders_cancel_cancels_what_has_not_run_and_is_audited(db, dsn):
    assert run_cli("enqueue-order", "delaware_llc", "--order", "ORD-7", "--input",
                   json.dumps(DELAWARE_LLC)).returncode == 0
    out = run_cli("orders", "cancel", "ORD-7", "--reason", "client withdrew")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "order ORD-7 cancelled: jobs 1, 2, 3 cancelled"
    assert {r[2] for r in _rows(dsn)} == {"cancelled"}
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT action, target, reason FROM portalq.audit_log").fetchall() == [
            ("order.cancel", "order:ORD-7", "client withdrew")]
    again = run_cli("orders", "cancel", "ORD-7", "--reason", "again")
    assert again.returncode == 3 and "cancelled already" in again.stderr
    missing = run_cli("orders", "cancel", "ORD-8", "--reason", "x")
    assert missing.returncode == 2 and "no order 'ORD-8'" in missing.stderr
