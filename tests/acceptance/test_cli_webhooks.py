"""``portalq webhooks add/list/log/resume/remove`` through the real CLI: the signing secret
shown once and never again; bad input one line, non-zero, nothing written."""

from __future__ import annotations

import json

import psycopg

from tests.conftest import run_cli
from tests.webhook_receiver import stored_unchecked


def _subscriptions(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM portalq.webhook_subscriptions").fetchone()[0]


def test_add_list_log_resume_remove(db, dsn):
    out = run_cli("webhooks", "add", "https://app.example.com/hooks/portalq",
                  "--events", "completed,failed", "--json")
    assert out.returncode == 0, out.stderr
    added = json.loads(out.stdout)
    assert added["secret"].startswith("whsec_") and len(added["secret"]) == 6 + 44
    out = run_cli("webhooks", "list", "--json")
    [row] = json.loads(out.stdout)
    assert (row["id"], row["url"], row["events"], row["paused_at"]) == (
        added["id"], "https://app.example.com/hooks/portalq", ["completed", "failed"], None)
    assert added["secret"] not in out.stdout and "secret" not in row
    with psycopg.connect(dsn) as c:   # sealed at rest, not stored as shown
        stored = bytes(c.execute("SELECT secret FROM portalq.webhook_subscriptions").fetchone()[0])
    assert added["secret"].encode() not in stored
    out = run_cli("webhooks", "list")
    assert "[completed,failed]  active; 0 waiting" in out.stdout
    assert run_cli("webhooks", "log", str(added["id"])).returncode == 0
    assert run_cli("webhooks", "resume", str(added["id"])).returncode == 0
    out = run_cli("webhooks", "remove", str(added["id"]))
    assert out.returncode == 0 and _subscriptions(dsn) == 0


def test_bad_input_is_one_line_and_writes_nothing(db, dsn):
    cases = {
        ("add", "ftp://x.example.com/", "--events", "completed"): "a webhook URL is http(s)",
        ("add", "https://x.example.com/", "--events", "completed,paid"): "unknown event 'paid'",
        ("add", "https://x.example.com/", "--events", ","): "events: a comma-separated list",
        ("remove", "99"): "no webhook subscription 99",
        ("resume", "99"): "no webhook subscription 99",
        ("remove", "0"): "",
        # issue 48 #1: URLs that cannot be sent to, refused at add, not at each attempt
        ("add", "http://127.0.0.1:99999/hook", "--events", "cancelled"): "port 99999 is not",
        ("add", "http://127.0.0.1:abc/hook", "--events", "cancelled"): "port 'abc' is not",
        ("add", "http://127.0.0.1:8080/hook/café", "--events", "cancelled"):
            "percent-encode",
        ("add", "http://exa mple.com/hook", "--events", "cancelled"): "percent-encode",
        # issue 48 #3: credentials are never taken in a URL (stored and shown in clear)
        ("add", "http://u:PA55W0RD@app.example.com/h", "--events", "cancelled"):
            "no user or password",
        ("add", "https://app.example.com/h?token=T0KEN", "--events", "cancelled"):
            "no query string",
        # issue 48 #4
        ("log", "999999"): "no webhook subscription 999999",
        ("add", "http://10.1.2.3/hook", "--events", "cancelled"): "a private address",
        ("add", "http://192.168.0.7:8080/hook", "--events", "cancelled"): "a private address",
        ("add", "http://169.254.169.254/latest/meta-data/", "--events", "cancelled"):
            "a private address",
        ("add", "http://[fd00::1]/hook", "--events", "cancelled"): "a private address",
    }
    for args, message in cases.items():
        out = run_cli("webhooks", *args)
        assert out.returncode != 0 and message in out.stderr, (args, out.stderr)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("portalq: error:")
        assert "PA55W0RD" not in out.stderr and "T0KEN" not in out.stderr
    assert _subscriptions(dsn) == 0


def test_private_addresses_follow_the_setting(db, dsn):
    """PORTALQ_WEBHOOK_PRIVATE_ADDRESSES: loopback (the default: an app on this host, not
    the rest of the private network nor a cloud's metadata address), none, or all."""
    add = ("webhooks", "add", "--events", "cancelled")
    assert run_cli(*add, "http://127.0.0.1:8080/hook").returncode == 0
    out = run_cli(*add, "http://127.0.0.1:8080/hook",
                  env={"PORTALQ_WEBHOOK_PRIVATE_ADDRESSES": "none"})
    assert out.returncode == 2 and "a private address" in out.stderr
    out = run_cli(*add, "http://10.1.2.3/hook", env={"PORTALQ_WEBHOOK_PRIVATE_ADDRESSES": "all"})
    assert out.returncode == 0, out.stderr
    assert _subscriptions(dsn) == 2


def test_credentials_stored_before_are_never_shown(db, dsn):
    """A subscription stored with credentials in its URL before they were refused: list,
    list --json and log show it with them masked."""
    sub = stored_unchecked(dsn, "http://u:PA55W0RD@127.0.0.1:9/h?token=T0KEN&x=1",
                           ["cancelled"])
    for args in (("list",), ("list", "--json"), ("log", str(sub)), ("log", str(sub), "--json")):
        out = run_cli("webhooks", *args)
        assert out.returncode == 0, out.stderr
        assert "PA55W0RD" not in out.stdout and "T0KEN" not in out.stdout, out.stdout
    assert "http://u:***@127.0.0.1:9/h?token=***&x=***" in run_cli("webhooks", "list").stdout
