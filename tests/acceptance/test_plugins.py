"""The plugin route works from every command, not only ``portalq run`` (issue 14)."""

from __future__ import annotations

import json

from tests.conftest import run_cli

PLUGIN = {"PORTALQ_PLUGINS": "tests.plugins.renewal"}
SSN = "123-45-6789"
PAYLOAD = json.dumps({"licence": "L-1", "owner_ssn": SSN})


def test_unknown_without_the_plugin(db, dsn):
    out = run_cli("enqueue", "renew_licence", "--order", "ORD-1", "--payload", PAYLOAD)
    assert out.returncode != 0
    assert "unknown job type 'renew_licence'" in out.stderr
    assert out.stderr.count("\n") == 1


def test_enqueue_show_batch_and_patch_through_the_plugin(db, dsn, tmp_path):
    out = run_cli("enqueue", "renew_licence", "--order", "ORD-1", "--payload", PAYLOAD,
                  env=PLUGIN)
    assert out.returncode == 0, out.stderr
    job_id = int(out.stdout.strip())

    shown = run_cli("jobs", "show", str(job_id), "--json", env=PLUGIN)
    assert shown.returncode == 0, shown.stderr
    assert SSN not in shown.stdout           # the plugin's secret field, masked
    assert json.loads(shown.stdout)["payload"]["licence"] == "L-1"

    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(json.dumps({"job_type": "renew_licence", "order": f"ORD-{i}",
                                           "payload": {"licence": f"L-{i}",
                                                       "owner_ssn": SSN}})
                               for i in (2, 3)) + "\n")
    out = run_cli("enqueue-batch", str(batch), env=PLUGIN)
    assert out.returncode == 0, out.stderr

    assert run_cli("jobs", "cancel", str(job_id), env=PLUGIN).returncode == 0
    # a cancelled job's secrets are erased at once: the patch gives the SSN again
    patch = {"owner_ssn": SSN}
    bad = run_cli("jobs", "retry", str(job_id), "--payload-patch",
                  json.dumps({**patch, "years": 9}), env=PLUGIN)
    assert bad.returncode != 0 and "years" in bad.stderr   # validated by the plugin's schema
    good = run_cli("jobs", "retry", str(job_id), "--payload-patch",
                   json.dumps({**patch, "years": 2}), env=PLUGIN)
    assert good.returncode == 0, good.stderr
    after = json.loads(run_cli("jobs", "show", str(job_id), "--json", env=PLUGIN).stdout)
    assert after["payload"]["years"] == 2 and after["status"] == "pending"


def test_a_plugin_that_cannot_load_is_one_line(db, dsn):
    out = run_cli("enqueue", "name_search", "--order", "ORD-1", "--payload", "{}",
                  env={"PORTALQ_PLUGINS": "no_such_plugin_module"})
    assert out.returncode != 0
    assert out.stderr.strip() == ("portalq: error: cannot load plugin no_such_plugin_module: "
                                  "ModuleNotFoundError: No module named 'no_such_plugin_module'")


def test_a_plugins_order_source_builds_the_payload(db, dsn):
    out = run_cli("enqueue", "renew_licence", "--order", "L-7", "--json", env=PLUGIN)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["payload"]["years"] == 3
    missing = run_cli("enqueue", "renew_licence", "--order", "X-1", env=PLUGIN)
    assert missing.returncode != 0
    assert "no order 'X-1' in the order source of renew_licence" in missing.stderr


def _hijack(how: str, *args: str):
    return run_cli(*(args or ("enqueue", "name_search", "--order", "O-1", "--payload", "{}")),
                   env={"PORTALQ_PLUGINS": "tests.plugins.hijack", "PORTALQ_TEST_HIJACK": how})


def test_a_plugin_cannot_replace_a_built_in_job_type(db, dsn):
    """Issue 35 item 2: a plugin declaring ``obtain_ein`` replaced the built-in type and its
    SSNs were stored in clear."""
    ein = json.dumps({"legal_name": "X"})
    out = _hijack("replace", "enqueue", "obtain_ein", "--order", "O-1", "--payload", ein)
    assert out.returncode != 0 and out.stderr.count("\n") == 1, out.stderr
    assert "tests.plugins.hijack" in out.stderr and "obtain_ein" in out.stderr, out.stderr
    assert "already declared" in out.stderr, out.stderr


def test_a_secret_field_the_payload_lacks_is_refused(db, dsn):
    out = _hijack("typo")
    assert out.returncode != 0 and out.stderr.count("\n") == 1, out.stderr
    assert "tests.plugins.hijack" in out.stderr and "owner_snn" in out.stderr, out.stderr


def test_a_plugin_calling_sys_exit_is_one_line(db, dsn):
    out = _hijack("exit")
    assert out.returncode != 0 and out.returncode != 7, out
    assert out.stderr.strip() == ("portalq: error: cannot load plugin tests.plugins.hijack: "
                                  "it called sys.exit(7) while loading")
