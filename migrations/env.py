"""Alembic environment: the target metadata is jobs.db.models; the URL comes from portalq.

Every object of portalq lives in one schema (``PORTALQ_SCHEMA``, default ``portalq``),
the version table included, so that portalq can live in the business's own database beside
its tables, its own ``job_queue`` and its own ``alembic_version``. The migrations name their
objects unqualified and run with the search path set to that schema alone. An installation
made before the schema existed (its objects in ``public``, its revision in
``public.alembic_version``) is moved into the schema first, data kept
(:data:`portalq.jobs.db.schema_move.MOVE_SQL`).
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import create_engine, pool

from portalq.jobs.db.location import schema
from portalq.jobs.db.models import metadata
from portalq.jobs.db.schema_move import prepare_statements

config = context.config
SCHEMA = schema()


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from portalq.jobs.db.location import database_url

    return database_url()


def _configure(**kw: Any) -> None:
    context.configure(target_metadata=metadata, version_table_schema=SCHEMA, **kw)


def _prepare() -> None:
    for statement in prepare_statements(SCHEMA):
        context.execute(statement)


def run_offline() -> None:
    _configure(url=_url() if config.get_main_option("sqlalchemy.url") else
               "postgresql+psycopg://offline", literal_binds=True,
               dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        # as jobs.db.migrate.upgrade runs them: each statement sees what was committed
        # before it (0026's catch-up), whatever the database's default isolation
        context.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        _prepare()
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection=connection)
        with context.begin_transaction():
            _prepare()
            context.run_migrations()
        return
    engine = create_engine(_url(), poolclass=pool.NullPool, isolation_level="READ COMMITTED")
    with engine.connect() as conn:
        _configure(connection=conn)
        with context.begin_transaction():
            _prepare()
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
