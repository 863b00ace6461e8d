"""The embedded PostgreSQL lets nobody else in (issue 15): an owner-only socket directory,
SCRAM passwords kept 0600, portalq itself connecting as a role without superuser rights."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import psycopg
import pytest

from portalq.jobs.db import embedded
from tests.conftest import TEST_HOME, run_cli
from tests.service_helpers import files_under


@pytest.fixture
def pg(pg_server):
    if getattr(pg_server, "embedded", None) is None:
        pytest.skip("the tests run against PORTALQ_TEST_DATABASE_URL, not the embedded server")
    return pg_server.embedded


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _psql() -> str:
    return shutil.which("psql") or "psql"


def test_another_local_user_cannot_connect(pg):
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user (runuser)")
    for role in ("postgres", embedded.APP_ROLE):
        out = subprocess.run(["runuser", "-u", "nobody", "--", _psql(), "-h",
                              str(pg.socket_dir), "-U", role, "-d", "postgres", "-w",
                              "-c", "SELECT 1"], capture_output=True, text=True, timeout=30)
        assert out.returncode != 0
        assert "Permission denied" in out.stderr, out.stderr


def test_no_connection_without_the_password_even_through_the_socket(pg):
    # root can enter the socket directory: the password is what keeps it out
    for role in ("postgres", embedded.APP_ROLE):
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(f"host={pg.socket_dir} user={role} dbname=postgres "
                            f"passfile=/dev/null").close()
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(f"host={pg.socket_dir} user={role} dbname=postgres "
                            f"password=guess").close()


def test_portalq_runs_as_a_role_without_superuser_rights(pg, db, monkeypatch):
    from portalq.jobs.db.location import database_url

    monkeypatch.delenv("PORTALQ_DATABASE_URL")
    monkeypatch.setenv("PORTALQ_HOME", str(TEST_HOME))
    url = database_url()
    assert url.startswith(f"postgresql+psycopg://{embedded.APP_ROLE}@/")
    assert "passfile=" in url and pg.passfile.read_text().split(":")[-1].strip() not in url
    name = db.rsplit("/", 1)[1].split("?")[0]
    with psycopg.connect(pg.dsn(name, role=embedded.APP_ROLE), autocommit=True) as c:
        assert c.execute("SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles "
                         "WHERE rolname = current_user").fetchone() == (False, False, False)
        assert c.execute("SELECT count(*) FROM portalq.job_queue").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("COPY (SELECT 1) TO PROGRAM 'id'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("DROP TABLE portalq.job_queue")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("CREATE TABLE stolen (x text)")


def test_cli_migrates_as_owner_then_works_as_the_app_role(pg):
    env = {"PORTALQ_HOME": str(TEST_HOME), "PORTALQ_DATABASE_URL": ""}
    out = run_cli("migrate", env=env)
    assert out.returncode == 0, out.stderr
    out = run_cli("jobs", "list", "--json", env=env)
    assert out.returncode == 0, out.stderr
    out = run_cli("db", "url", env=env)
    assert out.stdout.startswith(f"postgresql+psycopg://{embedded.APP_ROLE}@/portalq?")


def test_files_are_owner_only_and_no_parent_is_loosened(pg):
    parents = [*TEST_HOME.resolve().parents, *embedded._pginstall().parents]
    before = {p: _mode(p) for p in parents}
    out = run_cli("db", "start", env={"PORTALQ_HOME": str(TEST_HOME)})
    assert out.returncode == 0, out.stderr
    assert {p: _mode(p) for p in parents} == before
    assert _mode(TEST_HOME) == 0o700
    assert _mode(pg.passfile) == 0o600
    # the keyring is made by the first sealed value (another test's, in a whole run)
    from portalq.jobs.secrets import crypto

    crypto.provider().current_id()
    assert _mode(TEST_HOME / "keys.json") == 0o600
    assert _mode(pg.socket_dir) == 0o700
    assert _mode(pg.pgdata) == 0o700
    if os.geteuid() == 0:   # the server's own folder, owned by its system user
        assert _mode(pg.pgdata.parent) == 0o700
        assert pg.pgdata.parent.stat().st_uid != 0
    loose = [p for p, st in files_under(pg.pgdata) if stat.S_IMODE(st.st_mode) & 0o077]
    assert loose == []



@pytest.mark.slow
def test_a_trust_cluster_of_an_older_portalq_gets_passwords(tmp_path):
    """Older portalq versions initialised the cluster with --auth=trust: on the next start
    it is switched to passwords (the old passwordless connection then fails)."""
    pg = embedded.EmbeddedPostgres(tmp_path / "home", settings={"fsync": "off"})
    try:
        pg.ensure_running()
        pg.stop()
        hba = pg.pgdata / "pg_hba.conf"
        hba.write_text("local all all trust\n")   # as an older portalq left it
        pg.passfile.unlink()
        pg.ensure_running()
        assert hba.read_text() == embedded._HBA
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(f"host={pg.socket_dir} user=postgres dbname=postgres "
                            f"passfile=/dev/null").close()
        with psycopg.connect(pg.dsn("portalq", role=embedded.APP_ROLE)) as c:
            assert c.execute("SELECT current_user").fetchone() == (embedded.APP_ROLE,)
    finally:
        pg.destroy()


def _server_ids(pg: embedded.EmbeddedPostgres) -> tuple[list[int], list[int]]:
    """The running server's (gids, supplementary groups), from /proc."""
    pid = int((pg.pgdata / "postmaster.pid").read_text().split()[0])
    status = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return ([int(g) for g in status["Gid"].split()],
            [int(g) for g in status["Groups"].split()])


@pytest.mark.slow
def test_a_deleted_home_does_not_brick_the_database(server_home):
    """Issue 35 (11): `portalq db stop`, `rm -rf $PORTALQ_HOME`, then the next command works
    (as root the data lives outside the home with the old passwords; a new passfile is
    made): the passwords are set again, the data is kept, and the home shows where it is."""
    home = server_home / "home"
    env = {"PORTALQ_HOME": str(home), "PORTALQ_DATABASE_URL": ""}
    pg = embedded.EmbeddedPostgres(home)
    try:
        assert run_cli("migrate", env=env).returncode == 0
        with psycopg.connect(pg.dsn("portalq"), autocommit=True) as c:
            c.execute("CREATE TABLE kept AS SELECT 'kept' AS x")
        if os.geteuid() == 0:   # the data is where an operator looking in the home finds it
            assert (home / "pgdata").resolve() == pg.pgdata.resolve()
        assert run_cli("db", "stop", env=env).returncode == 0
        shutil.rmtree(home)
        out = run_cli("jobs", "list", "--json", env=env)
        assert out.returncode == 0, out.stderr
        assert "password" in out.stderr and "\n" not in out.stderr.strip()   # said once
        with psycopg.connect(pg.dsn("portalq"), autocommit=True) as c:   # the same data
            assert c.execute("SELECT x FROM kept").fetchone() == ("kept",)
        # the home deleted while the server still runs (with the old passwords)
        shutil.rmtree(home)
        out = run_cli("jobs", "list", "--json", env=env)
        assert out.returncode == 0, out.stderr
        with psycopg.connect(pg.dsn("portalq"), autocommit=True) as c:
            assert c.execute("SELECT x FROM kept").fetchone() == ("kept",)
    finally:
        pg.destroy()


@pytest.mark.slow
def test_the_server_runs_without_group_root(server_home):
    """Issue 35 (6): run as root, the server ran as its system user but kept group root
    (gid 0) and root's supplementary groups."""
    if os.geteuid() != 0:
        pytest.skip("run as root only")
    pg = embedded.EmbeddedPostgres(server_home / "home", settings={"fsync": "off"})
    try:
        pg.ensure_running()
        gids, groups = _server_ids(pg)
        assert 0 not in gids and 0 not in groups, (gids, groups)
    finally:
        pg.destroy()
