"""Schema migrations (alembic), applied by ``portalq migrate`` and at service start."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

import portalq.migrations as migrations
from portalq.jobs.db import sql
from portalq.jobs.db.embedded import grant_after_migration, owner_url
from portalq.jobs.db.location import libpq_dsn, schema
from portalq.jobs.errors import PortalqError
from portalq.jobs.kinds import LockKey
from portalq.jobs.secrets import crypto, key_registry

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(migrations.__file__).parent


def alembic_config(url: str | None = None, *, output: io.StringIO | None = None) -> Config:
    # alembic and SQLAlchemy only to migrate: the worker never loads them
    from alembic.config import Config

    cfg = Config(output_buffer=output) if output is not None else Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` (idempotent; serialised by a lock)."""
    # alembic and SQLAlchemy only to migrate: the worker never loads them
    from alembic import command
    from sqlalchemy import create_engine, pool


    url = owner_url(url)   # the embedded server: migrations as the owner, not the app role
    # READ COMMITTED whatever the database's default: a migration that copies while the
    # business writes (0026) catches up with what was committed after its copy, which one
    # snapshot for the whole transaction (repeatable read) would never show it
    engine = create_engine(url, poolclass=pool.NullPool, isolation_level="READ COMMITTED")
    with engine.begin() as conn:
        # several nodes may start at once: one migrates, the others wait and find nothing to do
        conn.exec_driver_sql(sql.query("migrate_lock"), {"lock": int(LockKey.MIGRATE)})
        cfg = alembic_config(url)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    engine.dispose()
    grant_after_migration(url)
    note_key_file(url)


def offline_sql(revision: str = "head") -> str:
    """The SQL that ``upgrade`` would run, for DBAs."""
    # alembic and SQLAlchemy only to migrate: the worker never loads them
    from alembic import command

    buf = io.StringIO()
    cfg = alembic_config("postgresql+psycopg://offline/portalq", output=buf)
    command.upgrade(cfg, revision, sql=True)
    return buf.getvalue()


def current(url: str) -> str | None:
    # alembic and SQLAlchemy only to migrate: the worker never loads them
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine, pool

    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as conn:
        rev = MigrationContext.configure(
            conn, opts={"version_table_schema": schema()}).get_current_revision()
    engine.dispose()
    return rev


_REVISION = re.compile(r"^(down_revision|revision)\s*=\s*['\"]?(\w+|None)['\"]?", re.M)


def _graph() -> tuple[set[str], set[str | None]]:
    """Every revision and every parent, read from the migration files (no alembic)."""
    revs: set[str] = set()
    parents: set[str | None] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        found = {m.group(1): m.group(2) for m in _REVISION.finditer(path.read_text())}
        if "revision" in found:
            revs.add(found["revision"])
            parents.add(found.get("down_revision"))
    return revs, parents


def revisions() -> set[str]:
    """portalq's own revision ids (an application's alembic table holds others)."""
    return _graph()[0]


def head_revision() -> str | None:
    """The newest revision, read from the migration files without importing alembic
    (None when there is not exactly one head: then alembic decides)."""
    revs, parents = _graph()
    heads = revs - parents
    return heads.pop() if len(heads) == 1 else None


def upgrade_if_needed(url: str) -> None:
    """:func:`upgrade`, skipped (and alembic and SQLAlchemy never imported: a smaller
    service process) when the database is already at the head revision."""
    head = head_revision()
    if head is not None:
        try:
            with psycopg.connect(libpq_dsn(url)) as conn:
                rows = conn.execute(
                    f"SELECT version_num FROM {schema()}.alembic_version").fetchall()
            if [r[0] for r in rows] == [head]:
                note_key_file(url)
                return
        except psycopg.errors.UndefinedTable:
            pass
    upgrade(url)


def note_key_file(url: str) -> None:
    """Record the database as one using the key file, at migration and service start
    (jobs/secrets/key_registry.py: `keys retire` checks every such database). Not for another
    key provider, nor one that cannot be set up here (the migration does not need it)."""
    try:
        p = crypto.provider()
    except PortalqError:   # a key setup this node lacks is reported where it is used
        return
    if isinstance(p, crypto.FileKeyring):
        with psycopg.connect(libpq_dsn(url)) as conn:
            key_registry.note(conn, p, how=False)


def seed_portals(url: str, portals: list[dict[str, Any]]) -> list[str]:
    """Add the declared portals the database lacks (rows from ``PortalPreset.as_row``), in
    one transaction; existing portals are left as they are. Returns the codes added."""
    added = []
    with psycopg.connect(libpq_dsn(owner_url(url))) as conn:
        for row in portals:
            if sql.fetch_one(conn, "seed_portal", row) is not None:
                sql.fetch(conn, "seed_portal_hours", row)
                added.append(str(row["code"]))
    return added
