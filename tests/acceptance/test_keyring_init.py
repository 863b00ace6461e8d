"""Issue 48 item 21: a node never makes a keyring unless asked (``portalq keys init``).

A node started without the key file made its own keyring: the CLI there then sealed
secrets under a key no other node could open. And ``portalq run`` with a key file that is
not a keyring ended in a traceback (the key record's reader), exit 1."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.acceptance.test_bad_input_issue35 import ein, jobs_in, one_line
from tests.conftest import run_cli


@pytest.fixture
def keydir(tmp_path: Path) -> Path:
    d = tmp_path / "k"
    d.mkdir(mode=0o700)
    return d


def test_run_with_a_key_file_that_is_not_a_keyring_is_one_line(db, dsn, keydir: Path):
    bad = keydir / "keys.json"
    for text in ("this is not JSON", "[1, 2]"):
        bad.write_text(text)
        bad.chmod(0o600)
        out = run_cli("run", env={"PORTALQ_KEY_FILE": str(bad)}, timeout=60)
        one_line(out, str(bad), "not a portalq keyring")
        assert bad.read_text() == text


def test_no_keyring_is_made_unless_asked_with_keys_init(db, dsn, keydir: Path):
    path = keydir / "keys.json"
    env = {"PORTALQ_KEY_FILE": str(path)}
    # sealing a secret without a keyring: one line saying how to get one, nothing written
    one_line(ein(env), str(path), "portalq keys init")
    one_line(run_cli("keys", "status", env=env), str(path), "portalq keys init")
    assert not path.exists() and jobs_in(dsn) == 0
    out = run_cli("keys", "init", env=env)
    assert out.returncode == 0 and str(path) in out.stdout, out.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    made = path.read_bytes()
    assert set(json.loads(made)) == {"current", "keks", "hmac"}
    # asked again: the keyring is kept as it is (its keys seal what is stored)
    again = run_cli("keys", "init", env=env)
    assert again.returncode == 0 and "exists" in again.stdout, again.stderr
    assert path.read_bytes() == made
    assert ein(env).returncode == 0 and jobs_in(dsn) == 1
