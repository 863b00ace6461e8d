"""What runs before the migrations: portalq's schema made, and an installation made before
portalq had a schema of its own moved into it.

Until migration 0019 every object of portalq was created in ``public``. An installation
of then is recognised by a ``public.alembic_version`` that holds one of portalq's own
revisions (an application's alembic table holds its own revisions and is left alone, as
is one the migrating role does not own: it could not move it, and may not even read it);
its tables (with their sequences, indexes, constraints and triggers) and functions move
into the schema with ``ALTER ... SET SCHEMA``: data kept, nothing copied. The same
statements are part of ``portalq migrate --sql``, so a DBA can run them by hand.
"""

from __future__ import annotations

from portalq.jobs.db.migrate import revisions

#: the tables portalq had in ``public`` (revisions up to 0018, the last before the schema):
#: an installation in public can hold no others, and a table named like a later one of
#: portalq's (an application's own ``orders``, say) is the application's and stays
IN_PUBLIC = ("alembic_version", "audit_log", "console_login_failures", "console_sessions",
             "console_sso_identities", "console_users", "escalation_handling", "escalations",
             "job_artifacts", "job_documents", "job_events", "job_questions", "job_queue",
             "portal_accounts", "portal_closures", "portal_holidays", "portal_hours",
             "portal_notices", "portal_outage_signs", "portals")


def _literals(names: list[str]) -> str:
    return ", ".join("'" + n.replace("'", "''") + "'" for n in sorted(names))


def move_sql(schema: str) -> str:
    """One DO block: moves portalq's objects from ``public`` into ``schema`` when ``public``
    holds an installation of portalq's and ``schema`` holds none yet; else does nothing."""
    tables = _literals(list(IN_PUBLIC))
    ours_quoted = _literals(sorted(revisions())).replace("'", "''")
    return f"""DO $move$
DECLARE r record; ours boolean;
BEGIN
    IF to_regclass('public.alembic_version') IS NULL
       OR to_regclass('{schema}.alembic_version') IS NOT NULL THEN
        RETURN;
    END IF;
    -- moving needs its owner (or a superuser): a table this role does not own is the
    -- application's (its role may not even read it), never portalq's installation
    IF NOT coalesce(pg_has_role((SELECT relowner FROM pg_class
                                 WHERE oid = to_regclass('public.alembic_version')),
                                'USAGE'), false) THEN
        RETURN;
    END IF;
    -- dynamic: the table may not exist when the block is planned
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM public.alembic_version
                            WHERE version_num IN ({ours_quoted}))' INTO ours;
    IF NOT ours THEN
        RETURN;
    END IF;
    FOR r IN SELECT c.relname FROM pg_class c
             WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
               AND c.relname IN ({tables}) LOOP
        EXECUTE format('ALTER TABLE public.%I SET SCHEMA {schema}', r.relname);
    END LOOP;
    FOR r IN SELECT p.oid::regprocedure AS f FROM pg_proc p
             WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'portalq\\_%' LOOP
        EXECUTE format('ALTER FUNCTION %s SET SCHEMA {schema}', r.f);
    END LOOP;
END $move$"""


def prepare_statements(schema: str) -> list[str]:
    """The statements that run before the migrations, in their transaction: the schema, the
    move of an older installation, and the search path of the migrations (unqualified names
    in a migration are objects of ``schema``, never of the application's)."""
    return [f"CREATE SCHEMA IF NOT EXISTS {schema}", move_sql(schema),
            f"SET LOCAL search_path TO {schema}"]
