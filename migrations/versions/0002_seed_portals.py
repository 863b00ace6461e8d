"""Seed the portals and their weekly hours (each with its public source in
docs/portals/sources.md, "Seeded hours").

Data, frozen at this revision: later changes of hours go through ``portalq portals
set-hours`` or a new migration, never by editing this one.

Revision ID: 0002
Revises: 0001
"""
from __future__ import annotations

from datetime import time

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

MON_FRI, MON_SAT, EVERY_DAY = range(5), range(6), range(7)

PORTALS = [
    # code, name, timezone, holiday country, subdivision, max sessions, cut-off minutes
    ("bc_corporate_online", "BC Registries / BC Corporate Online", "America/Vancouver",
     "CA", "BC", 2, 20),
    ("irs_ein", "IRS EIN Assistant", "America/New_York", "US", None, 1, 15),
    ("delaware_icis", "Delaware ICIS", "America/New_York", "US", "DE", 2, 15),
    ("crtc", "CRTC My CRTC Account", "America/Toronto", None, None, 2, 0),
    ("email", "Email delivery", "UTC", None, None, 10, 0),
]

HOURS = (
    [("bc_corporate_online", d, time(6), time(22)) for d in MON_SAT]
    + [("bc_corporate_online", 6, time(13), time(22))]
    + [("irs_ein", d, time(7), time(22)) for d in MON_FRI]
    + [("delaware_icis", d, time(8), time(22, 30)) for d in MON_FRI]
    + [("crtc", d, time(0), time(0)) for d in EVERY_DAY]
    + [("email", d, time(0), time(0)) for d in EVERY_DAY]
)


def upgrade() -> None:
    portals = sa.table(
        "portals", sa.column("code", sa.Text), sa.column("name", sa.Text),
        sa.column("timezone", sa.Text), sa.column("holiday_country", sa.Text),
        sa.column("holiday_subdiv", sa.Text), sa.column("max_concurrent_sessions", sa.Integer),
        sa.column("cutoff_minutes", sa.Integer))
    hours = sa.table(
        "portal_hours", sa.column("portal", sa.Text), sa.column("weekday", sa.SmallInteger),
        sa.column("opens", sa.Time), sa.column("closes", sa.Time))
    op.bulk_insert(portals, [dict(zip(
        ("code", "name", "timezone", "holiday_country", "holiday_subdiv",
         "max_concurrent_sessions", "cutoff_minutes"), row)) for row in PORTALS])
    op.bulk_insert(hours, [dict(zip(("portal", "weekday", "opens", "closes"), row))
                           for row in HOURS])


def downgrade() -> None:
    op.execute("DELETE FROM portal_hours WHERE portal IN "
               "('bc_corporate_online','irs_ein','delaware_icis','crtc','email')")
    op.execute("DELETE FROM portals WHERE code IN "
               "('bc_corporate_online','irs_ein','delaware_icis','crtc','email')")
