"""The live view's frames (issue 51): the newest masked screencast frame of each running
browser job, written by the worker that runs it and read by the console (another process,
maybe another host), which hears of each on the ``portalq_live`` channel.

Unlogged: a frame is worth nothing after a crash (the next one replaces it), and a frame a
second of a busy page should not fill the write-ahead log or the replicas. One row per job:
the newest frame replaces the one before, and the row goes when the job's browser does
(or with the job). ``holder``: the console user who took the page over (one at a time);
their input goes to the worker on ``portalq_live_input``.

Revision ID: 0032
Revises: 0031
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "live_frames",
        sa.Column("job_id", sa.BigInteger,
                  sa.ForeignKey("job_queue.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.BigInteger, nullable=False),
        # when Chromium took the frame (its clock: seconds since the epoch)
        sa.Column("taken_at", sa.Float, nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("width", sa.Integer, nullable=False),
        sa.Column("height", sa.Integer, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("jpeg", sa.LargeBinary, nullable=False),
        # the console user driving the page (a takeover), one at a time
        sa.Column("holder", sa.Text),
        sa.Column("held_at", sa.DateTime(timezone=True)),
        prefixes=["UNLOGGED"],
    )


def downgrade() -> None:
    op.drop_table("live_frames")
