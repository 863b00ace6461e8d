"""The database schema that holds every object of portalq (``PORTALQ_SCHEMA``). Below
jobs/database.py and jobs/embedded.py, which both need it (database.py re-exports it)."""

from __future__ import annotations

import os
import re
from functools import lru_cache

from portalq.jobs.errors import InputError

DEFAULT_SCHEMA = "portalq"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@lru_cache(maxsize=1)
def schema() -> str:
    """The database schema that holds every object of portalq (``PORTALQ_SCHEMA``, default
    ``portalq``): nothing of portalq goes into ``public`` or any schema of the business's
    application. A plain lower-case identifier, so it is written into SQL unquoted."""
    name = os.environ.get("PORTALQ_SCHEMA", DEFAULT_SCHEMA).strip()
    if not _SCHEMA_NAME.fullmatch(name) or name in ("public", "pg_catalog", "information_schema"):
        raise InputError(f"PORTALQ_SCHEMA: {name!r} is not a schema portalq can own (a "
                         "lower-case name of letters, digits and _, not public or pg_*)")
    if name.startswith("pg_"):
        raise InputError(f"PORTALQ_SCHEMA: {name!r}: names starting pg_ are PostgreSQL's")
    return name
