"""portalq never changes the mode of a folder it did not create (issue 35 item 3): pointed
at a shared folder (sticky, like /tmp) for its key file or artifacts, it used to chmod it to
0700 and drop the sticky bit -- as root on /tmp that locks every other user out."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from portalq.jobs import files
from portalq.jobs.errors import InputError
from tests.conftest import run_cli


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture
def shared() -> Path:
    """A sticky, world-writable folder like /tmp (not under pytest's tmp_path, whose
    parents are 0700)."""
    path = Path(tempfile.mkdtemp(prefix="portalq-shared-"))
    path.chmod(0o1777)
    yield path
    for p in sorted(path.rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
    path.rmdir()


def test_an_existing_shared_folder_is_left_as_it_is(shared: Path):
    files.private_dir(shared)
    assert _mode(shared) == 0o1777
    mine = files.private_dir(shared / "portalq" / "artifacts")   # what portalq creates
    assert _mode(shared) == 0o1777
    assert _mode(mine) == 0o700 and _mode(mine.parent) == 0o700


def test_an_existing_folder_of_ours_keeps_its_mode(tmp_path: Path):
    folder = tmp_path / "mine"
    folder.mkdir(mode=0o750)
    folder.chmod(0o750)
    files.private_dir(folder)
    assert _mode(folder) == 0o750


def test_a_folder_others_may_write_without_sticky_is_refused(tmp_path: Path):
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(InputError, match="writable by other users"):
        files.private_dir(folder)
    assert _mode(folder) == 0o777
    with pytest.raises(InputError, match="writable by other users"):
        files.write_private(folder / "keys.json", b"{}")
    assert not (folder / "keys.json").exists()


def test_keys_status_and_key_creation_leave_a_shared_folder_alone(shared: Path, db: str):
    env = {"PORTALQ_KEY_FILE": str(shared / "keys.json")}
    out = run_cli("keys", "init", env=env)
    assert _mode(shared) == 0o1777, out.stderr
    assert out.returncode == 0, out.stderr
    assert _mode(shared / "keys.json") == 0o600
    out = run_cli("keys", "status", env=env)
    assert out.returncode == 0 and _mode(shared) == 0o1777, out.stderr


def test_write_private_does_not_follow_a_planted_temporary_file(shared: Path):
    """In a shared folder another user can plant the temporary name as a symlink: the
    write must not go through it."""
    victim = shared / "victim"
    victim.write_bytes(b"untouched")
    target = shared / "keys.json"
    (shared / f".keys.json.{os.getpid()}.tmp").symlink_to(victim)
    files.write_private(target, b"{}")
    assert victim.read_bytes() == b"untouched" and target.read_bytes() == b"{}"
    assert _mode(target) == 0o600


def test_which_secret_files_are_refused(tmp_path: Path):
    """Issue 35 item 6: a secret file of one's own that others may read is refused; group
    access (Kubernetes' fsGroup mounts 0440) and a platform's world-readable mount owned by
    another user are not, but a file anyone may change always is."""
    f = tmp_path / "secret"
    f.write_text("x")
    for mode, refused in ((0o600, False), (0o640, False), (0o644, True), (0o602, True)):
        f.chmod(mode)
        if refused:
            with pytest.raises(InputError, match="by others"):
                files.check_secret_file(f, f.stat(), "secret file")
        else:
            files.check_secret_file(f, f.stat(), "secret file")
    if os.geteuid() == 0:
        os.chown(f, 65534, 65534)
        f.chmod(0o644)
        files.check_secret_file(f, f.stat(), "secret file")
        f.chmod(0o666)
        with pytest.raises(InputError, match="writable by others"):
            files.check_secret_file(f, f.stat(), "secret file")


def test_a_vault_token_file_others_may_read_is_refused(tmp_path: Path):
    from portalq.jobs.errors import KeyError_
    from portalq.jobs.secrets.vault_transit import VaultTransit

    token = tmp_path / "token"
    token.write_text("s.secret\n")
    token.chmod(0o644)
    vault = VaultTransit("http://127.0.0.1:1", token_file=token)
    with pytest.raises(KeyError_, match="readable by others"):
        vault._token_now()
    token.chmod(0o600)
    assert vault._token_now() == "s.secret"
    token.write_bytes(b"\xff\xfe")   # not text: one line, not a traceback
    os.utime(token, ns=(1, 1))
    with pytest.raises(KeyError_, match="not UTF-8 text"):
        vault._token_now()
