"""``portalq enqueue file_entity --order ORD-1001`` works as written: the payload comes from
the business's order through the declared order source (issue 14)."""

from __future__ import annotations

import json

import psycopg

from tests import payloads
from tests.conftest import run_cli

ORDERS = """CREATE TABLE business_orders (order_id text PRIMARY KEY, filing jsonb NOT NULL);"""
SQL = {"PORTALQ_ORDER_SQL_FILE_ENTITY":
       "SELECT filing FROM business_orders WHERE order_id = %(order_id)s"}


def _orders(dsn):
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(ORDERS)
        c.execute("INSERT INTO business_orders VALUES ('ORD-1001', %s), ('ORD-BAD', %s)",
                  (json.dumps(payloads.FILE_ENTITY_DE), json.dumps({"jurisdiction": "XX"})))


def _jobs(dsn):
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT order_id, portal, payload FROM portalq.job_queue").fetchall()


def test_enqueue_by_order_as_the_design_card_says(db, dsn):
    _orders(dsn)
    out = run_cli("enqueue", "file_entity", "--order", "ORD-1001", env=SQL)
    assert out.returncode == 0, out.stderr
    [(order, portal, payload)] = _jobs(dsn)
    assert (order, portal) == ("ORD-1001", "delaware_icis")
    assert payload["legal_name"] == payloads.FILE_ENTITY_DE["legal_name"]


def test_payload_still_overrides_the_order(db, dsn):
    _orders(dsn)
    out = run_cli("enqueue", "file_entity", "--order", "ORD-1001", "--payload",
                  json.dumps({**payloads.FILE_ENTITY_DE, "legal_name": "Other LLC"}), env=SQL)
    assert out.returncode == 0, out.stderr
    assert _jobs(dsn)[0][2]["legal_name"] == "Other LLC"


def test_order_source_errors_are_one_line_and_write_nothing(db, dsn):
    _orders(dsn)
    cases = {
        ("ORD-NONE", json.dumps(SQL)): "no order 'ORD-NONE' found by PORTALQ_ORDER_SQL_FILE_ENTITY",
        ("ORD-BAD", json.dumps(SQL)): "invalid file_entity payload: jurisdiction",
        ("ORD-1001", "{}"): "file_entity has no order source",
        ("ORD-1001", json.dumps({"PORTALQ_ORDER_SQL_FILE_ENTITY":
                                 "WITH d AS (DELETE FROM business_orders RETURNING *) "
                                 "SELECT filing FROM d WHERE order_id = %(order_id)s"})):
            "ReadOnlySqlTransaction",
    }
    for (order, env), message in cases.items():
        out = run_cli("enqueue", "file_entity", "--order", order, env=json.loads(env))
        assert out.returncode != 0 and message in out.stderr, (order, out.stderr)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("portalq: error:")
    assert _jobs(dsn) == []
    with psycopg.connect(dsn) as c:   # the configured query could not write
        assert c.execute("SELECT count(*) FROM business_orders").fetchone()[0] == 2


def test_order_query_runs_as_one_read_only_statement_with_a_timeout(db, dsn):
    """Issue 35 item 1: a query without the placeholder ran as several statements through
    the simple protocol, so ``SELECT ...; COMMIT; INSERT ...`` committed its write (exit 0)
    and the SELECT-last variant wrote and then failed; and it had no statement timeout."""
    _orders(dsn)
    select = "SELECT filing FROM business_orders WHERE order_id = 'ORD-1001'"
    insert = "INSERT INTO business_orders VALUES ('ORD-EVIL', '{}')"
    cases = {
        f"{select}; COMMIT; {insert}": "must bind the order id",
        f"{insert}; COMMIT; {select}": "must be one SELECT",
        f"{select} AND order_id = %(order_id)s; COMMIT; {insert}": "must be one statement",
        f"{select} -- %(order_id)s\n; COMMIT; {insert}": "must be one statement",
        "SET TRANSACTION READ WRITE": "SELECT",
        "SELECT pg_sleep(30), filing FROM business_orders WHERE order_id = %(order_id)s":
            "statement timeout",
    }
    for query, message in cases.items():
        out = run_cli("enqueue", "file_entity", "--order", "ORD-1001",
                      env={"PORTALQ_ORDER_SQL_FILE_ENTITY": query,
                           "PORTALQ_ORDER_SQL_TIMEOUT": "1"})
        assert out.returncode != 0 and message in out.stderr, (query, out.stderr)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("portalq: error:")
    assert _jobs(dsn) == []
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM business_orders").fetchone()[0] == 2
