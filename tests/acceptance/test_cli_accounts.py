"""``portalq accounts``: accounts as configuration, secrets from the provider only (issue 16)."""

from __future__ import annotations

import json
import os

import psycopg

from tests.conftest import run_cli

SECRET = "Tr0ub4dor&3-not-in-the-db"


def test_add_list_pause_resume_audited_and_no_secret_in_the_database(db, dsn, tmp_path):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "account_crtc_ops_password").write_text(SECRET + "\n")
    os.chmod(secrets / "account_crtc_ops_password", 0o600)
    env = {"PORTALQ_SECRETS_DIR": str(secrets)}
    assert run_cli("accounts", "add", "crtc", "ops", "--username", "ops@acme.example",
                   env=env).returncode == 0
    bad = run_cli("accounts", "add", "moon", "ops", "--username", "x")
    assert bad.returncode == 2 and bad.stderr.strip() == "portalq: error: unknown portal 'moon'"
    bad = run_cli("accounts", "add", "crtc", "Ops!", "--username", "x")
    assert bad.returncode == 2 and "account name 'Ops!'" in bad.stderr

    [row] = json.loads(run_cli("accounts", "list", "--json", env=env).stdout)
    assert (row["portal"], row["name"], row["username"]) == ("crtc", "ops", "ops@acme.example")
    assert row["secrets"] == {"password": True, "totp_seed": False}

    assert run_cli("accounts", "pause", "crtc", "ops", "--reason", "rotating").returncode == 0
    again = run_cli("accounts", "pause", "crtc", "ops")
    assert again.returncode == 3 and "paused already" in again.stderr
    [row] = json.loads(run_cli("accounts", "list", "--json").stdout)
    assert row["paused_by"] == "operator" and row["pause_reason"] == "rotating"
    assert run_cli("accounts", "resume", "crtc", "ops", "--reason", "fixed").returncode == 0

    with psycopg.connect(dsn) as c:
        actions = [r[0] for r in c.execute(
            "SELECT action FROM portalq.audit_log WHERE target = 'account:crtc/ops' ORDER BY id")]
        dump = json.dumps([list(r) for r in c.execute(
            "SELECT * FROM portalq.portal_accounts").fetchall()], default=str)
    assert actions == ["account.add", "account.pause", "account.resume"]
    assert SECRET not in dump


def test_a_secret_file_others_can_read_is_refused(db, dsn, tmp_path):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "account_crtc_ops_password").write_text(SECRET)
    os.chmod(secrets / "account_crtc_ops_password", 0o644)
    env = {"PORTALQ_SECRETS_DIR": str(secrets)}
    assert run_cli("accounts", "add", "crtc", "ops", "--username", "u", env=env).returncode == 0
    [row] = json.loads(run_cli("accounts", "list", "--json", env=env).stdout)
    assert row["secrets"]["password"] is False


def test_the_environment_provides_secrets_too(db, dsn):
    env = {"PORTALQ_ACCOUNT_CRTC_OPS_TOTP_SEED": "JBSWY3DPEHPK3PXP"}
    assert run_cli("accounts", "add", "crtc", "ops", "--username", "u").returncode == 0
    [row] = json.loads(run_cli("accounts", "list", "--json", env=env).stdout)
    assert row["secrets"] == {"password": False, "totp_seed": True}
