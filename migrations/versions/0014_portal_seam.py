"""The portal seam: a portal's address is its data; checkpoints in the submission protocol.

- ``portals.url``: the real portal's address, seeded for the built-in portals (a demo or a
  test points them at the stand-ins explicitly, see ``PORTALQ_STANDIN_URL``).
- Checkpoints written before the submission protocol (``stage="submitting"`` and each
  flow's own keys) are rewritten into its record (``"submissions"``, jobs/submission.py):
  after this revision the rescuer and ``--not-filed`` read nothing else, so a job that was
  in doubt must stay in doubt. The old keys are left where they were (harmless).

Revision ID: 0014
Revises: 0013
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

URLS = {
    "bc_corporate_online": "https://www.bcregistry.gov.bc.ca",
    "irs_ein": "https://sa.www4.irs.gov/modiein/individual/index.jsp",
    "delaware_icis": "https://icis.corp.delaware.gov",
    "crtc": "https://services.crtc.gc.ca",
}

# (which jobs, submission name, reference key, stages that mean confirmed, confirmation keys)
LEGACY = [
    ("job_type = 'obtain_ein'", "ein_application", "client_ref", ("assigned",),
     ("ein", "legal_name")),
    ("job_type = 'file_entity' AND payload->>'jurisdiction' = 'DE'", "formation", "client_ref",
     ("filed",), ("file_number", "certificate_url")),
    ("job_type = 'process_crtc'", "crtc_registration", "crtc_registration_reference",
     ("submitted",), ("confirmation",)),
]
BC = "(job_type = 'name_search' OR (job_type = 'file_entity' AND payload->>'jurisdiction' = 'BC'))"
BC_KINDS = {"name_request": ("nr_number", "nr_state", "nr_name", "nr_expires_on"),
            "incorporation": ("incorporation_number", "legal_name")}


def _record(state: str, ref_key: str | None, keys: tuple[str, ...]) -> str:
    """SQL: the protocol's record for a legacy checkpoint, NULL where ``state`` is NULL.
    Plain SQL, so ``portalq migrate --sql`` (offline) gives a DBA the same conversion."""
    conf = ", ".join(f"'{k}', checkpoint->'{k}'" for k in keys)
    ref = f"checkpoint->'{ref_key}'" if ref_key else "NULL::jsonb"
    return f"""CASE WHEN ({state}) IS NULL THEN NULL ELSE jsonb_strip_nulls(jsonb_build_object(
        'state', ({state}), 'reference', {ref}, 'at', checkpoint->'submitted_at',
        'confirmation', CASE ({state})
            WHEN 'confirmed' THEN jsonb_build_object({conf or "'_', NULL::jsonb"})
            WHEN 'refused' THEN jsonb_build_object('reason', checkpoint->'last_error') END))
        END"""


def _convert(where: str, records: dict[str, str]) -> str:
    pairs = ", ".join(f"'{name}', {sql}" for name, sql in records.items())
    return f"""UPDATE job_queue
    SET checkpoint = checkpoint || jsonb_build_object('submissions',
                                                      jsonb_strip_nulls(jsonb_build_object({pairs})))
    WHERE ({where}) AND checkpoint ? 'stage' AND NOT checkpoint ? 'submissions'"""


def upgrade() -> None:
    op.add_column("portals", sa.Column("url", sa.Text))
    for code, url in URLS.items():
        op.execute(f"UPDATE portals SET url = '{url}' WHERE code = '{code}'")
    stage = "checkpoint->>'stage'"
    builtin = []
    for where, name, ref_key, done, keys in LEGACY:
        done_sql = ", ".join(f"'{d}'" for d in done)
        state = (f"CASE WHEN {stage} IN ({done_sql}) OR checkpoint->>'{keys[0]}' IS NOT NULL "
                 f"THEN 'confirmed' WHEN {stage} = 'submitting' THEN 'submitting' "
                 f"WHEN {stage} = 'not_accepted' THEN 'refused' END")
        op.execute(_convert(where, {name: _record(state, ref_key, keys)}))
        builtin.append(f"({where})")
    op.execute(_convert(BC, {kind: _record(
        f"CASE WHEN checkpoint->>'{keys[0]}' IS NOT NULL THEN 'confirmed' "
        f"WHEN {stage} = 'submitting' AND checkpoint->>'submission' = '{kind}' "
        "THEN 'submitting' END", f"{kind}_reference", keys)
        for kind, keys in BC_KINDS.items()}))
    builtin.append(BC)
    # any other flow (a plugin's) that was past its point of no return stays in doubt
    op.execute(f"""UPDATE job_queue SET checkpoint = checkpoint || jsonb_build_object(
            'submissions', jsonb_build_object(coalesce(checkpoint->>'submission', 'submission'),
                                              jsonb_build_object('state', 'submitting')))
        WHERE NOT ({' OR '.join(builtin)}) AND {stage} = 'submitting'
          AND NOT checkpoint ? 'submissions'""")


def downgrade() -> None:
    # a submission in doubt stays in doubt for the older code (which reads "stage")
    op.execute("""
        UPDATE job_queue j SET checkpoint = (j.checkpoint - 'submissions')
            || CASE WHEN d.name IS NULL THEN '{}'::jsonb
                    ELSE jsonb_build_object('stage', 'submitting', 'submission', d.name) END
        FROM (SELECT q.id, (SELECT s.key FROM jsonb_each(q.checkpoint->'submissions') s
                            WHERE s.value->>'state' = 'submitting' LIMIT 1) AS name
              FROM job_queue q WHERE q.checkpoint ? 'submissions') d
        WHERE j.id = d.id""")
    op.drop_column("portals", "url")
