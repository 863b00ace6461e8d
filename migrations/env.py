"""Alembic environment: the target metadata is jobs.models; the URL comes from portalq."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from portalq.jobs.models import metadata

config = context.config


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from portalq.jobs.database import database_url

    return database_url()


def run_offline() -> None:
    context.configure(url=_url() if config.get_main_option("sqlalchemy.url") else
                      "postgresql+psycopg://offline", target_metadata=metadata,
                      literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=metadata)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=metadata)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
