"""Schema migrations (alembic), applied by ``portalq migrate`` and at service start."""

from __future__ import annotations

import io
from pathlib import Path

from alembic import command
from alembic.config import Config

import migrations

MIGRATIONS_DIR = Path(migrations.__file__).parent


def alembic_config(url: str | None = None, *, output: io.StringIO | None = None) -> Config:
    cfg = Config(output_buffer=output) if output is not None else Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` (idempotent; serialised by a lock)."""
    from sqlalchemy import create_engine, pool, text

    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.begin() as conn:
        # several nodes may start at once: one migrates, the others wait and find nothing to do
        conn.execute(text("SELECT pg_advisory_xact_lock(7262010001)"))
        cfg = alembic_config(url)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    engine.dispose()


def offline_sql(revision: str = "head") -> str:
    """The SQL that ``upgrade`` would run, for DBAs."""
    buf = io.StringIO()
    cfg = alembic_config("postgresql+psycopg://offline/portalq", output=buf)
    command.upgrade(cfg, revision, sql=True)
    return buf.getvalue()


def current(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine, pool

    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as conn:
        rev = MigrationContext.configure(conn).get_current_revision()
    engine.dispose()
    return rev
