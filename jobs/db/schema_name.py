"""The database schema that holds every object of portalq (``PORTALQ_SCHEMA``). Below
jobs/db/location.py and jobs/db/embedded.py, which both need it (location.py re-exports it)."""

from __future__ import annotations

from functools import lru_cache

from portalq.jobs import settings

DEFAULT_SCHEMA = settings.sections.DEFAULT_SCHEMA


@lru_cache(maxsize=1)
def schema() -> str:
    """The database schema that holds every object of portalq (``PORTALQ_SCHEMA``, default
    ``portalq``): nothing of portalq goes into ``public`` or any schema of the business's
    application. A plain lower-case identifier (checked by the settings model), so it is
    written into SQL unquoted."""
    return settings.current(settings.DatabaseSettings).db_schema
