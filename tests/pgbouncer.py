"""A real PgBouncer (Debian's package) in transaction pooling mode, in front of the test
server, for the tests that run portalq behind a pooler.

Its userlist is written from the test server's URL (user and password, whatever the
server's authentication): with a password PgBouncer checks clients by SCRAM and logs in
to PostgreSQL with it; without one (the embedded server trusts its local socket) it
trusts its clients, which reach it on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

import psycopg
from sqlalchemy.engine import URL

from tests.ports import free_port


def pgbouncer_binary() -> str | None:
    return shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None)


def _from_passfile(server: URL, user: str) -> str:
    """The user's password from the URL's libpq ``passfile`` (the embedded server keeps its
    generated passwords there, never in a URL); "" when there is none."""
    passfile = server.query.get("passfile")
    if isinstance(passfile, tuple):
        passfile = passfile[0]
    if not passfile or not Path(passfile).is_file():
        return ""
    for line in Path(passfile).read_text().splitlines():
        fields = line.split(":")
        if len(fields) >= 5 and fields[3] in (user, "*"):
            return ":".join(fields[4:]).replace("\\:", ":").replace("\\\\", "\\")
    return ""


class PgBouncer:
    """``PgBouncer(server_url, folder).start()``; ``url(db)`` is a URL through it."""

    def __init__(self, server: URL, folder: Path, *, pool_size: int = 20) -> None:
        self.server = server
        self.folder = folder
        self.port = free_port()
        self.pool_size = pool_size
        self.proc: subprocess.Popen[bytes] | None = None

    def _config(self) -> str:
        host = self.server.query.get("host") or self.server.host or "127.0.0.1"
        if isinstance(host, tuple):
            host = host[0]
        port = self.server.port or 5432
        user = self.server.username or "postgres"
        password = self.server.password or _from_passfile(self.server, user)
        quoted = password.replace('"', '""')
        (self.folder / "userlist.txt").write_text(f'"{user}" "{quoted}"\n')
        auth = "scram-sha-256" if password else "trust"
        return f"""[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = {auth}
auth_file = {self.folder / 'userlist.txt'}
pool_mode = transaction
max_client_conn = 1000
default_pool_size = {self.pool_size}
ignore_startup_parameters = extra_float_digits
logfile = {self.folder / 'pgbouncer.log'}
pidfile = {self.folder / 'pgbouncer.pid'}
admin_users = {user}
"""

    def start(self, timeout: float = 20) -> PgBouncer:
        binary = pgbouncer_binary()
        if binary is None:
            raise RuntimeError("pgbouncer is not installed (tools/ensure-pgbouncer.sh)")
        self.folder.mkdir(parents=True, exist_ok=True)
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(self._config())
        args = [binary, str(ini)]
        if os.geteuid() == 0:
            # PgBouncer refuses to run as root: as the embedded server's system user
            from portalq.jobs.db.embedded import SYSTEM_USER

            entry = pwd.getpwnam(SYSTEM_USER)
            for path in [self.folder, *self.folder.iterdir()]:
                os.chown(path, entry.pw_uid, entry.pw_gid)
            args = [binary, "-u", SYSTEM_USER, str(ini)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return self
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    log = self.folder / "pgbouncer.log"
                    raise RuntimeError("pgbouncer did not start: " + (
                        log.read_text()[-2000:] if log.exists() else "")) from None
                time.sleep(0.05)

    def url(self, database: str) -> str:
        """A SQLAlchemy URL of ``database`` through the pooler."""
        user = self.server.username or "postgres"
        return URL.create("postgresql+psycopg", username=user,
                          password=self.server.password or _from_passfile(self.server, user)
                          or None, host="127.0.0.1", port=self.port,
                          database=database).render_as_string(hide_password=False)

    def dsn(self, database: str) -> str:
        return self.url(database).replace("postgresql+psycopg://", "postgresql://", 1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
