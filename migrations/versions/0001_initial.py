"""job queue, events, escalations, portals

Revision ID: 0001
Revises:
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('job_queue',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('job_type', sa.Text(), nullable=False),
    sa.Column('order_id', sa.Text(), nullable=False),
    sa.Column('portal', sa.Text(), nullable=False),
    sa.Column('payload', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'pending'"), nullable=False),
    sa.Column('priority', sa.SmallInteger(), server_default=sa.text('0'), nullable=False),
    sa.Column('run_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('attempts', sa.SmallInteger(), server_default=sa.text('0'), nullable=False),
    sa.Column('max_attempts', sa.SmallInteger(), server_default=sa.text('5'), nullable=False),
    sa.Column('idempotency_key', sa.Text(), nullable=True),
    sa.Column('rate_key', sa.Text(), nullable=True),
    sa.Column('lock_owner', sa.Text(), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('checkpoint', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('result', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('pending','deferred','running','completed','failed','cancelled')", name='job_queue_status'),
    sa.CheckConstraint('max_attempts > 0', name='job_queue_max_attempts_positive'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('idempotency_key', name='job_queue_idempotency_key')
    )
    op.create_index('job_queue_claim', 'job_queue', ['portal', sa.literal_column('priority DESC'), 'run_at', 'id'], unique=False, postgresql_where=sa.text("status IN ('pending','deferred')"))
    op.create_index('job_queue_finished', 'job_queue', ['finished_at'], unique=False, postgresql_where=sa.text("status IN ('completed','cancelled')"))
    op.create_index('job_queue_order', 'job_queue', ['order_id'], unique=False)
    op.create_index('job_queue_rate', 'job_queue', ['portal', 'rate_key', 'started_at'], unique=False, postgresql_where=sa.text('rate_key IS NOT NULL'))
    op.create_index('job_queue_running', 'job_queue', ['heartbeat_at'], unique=False, postgresql_where=sa.text("status = 'running'"))
    op.create_table('portals',
    sa.Column('code', sa.Text(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('timezone', sa.Text(), nullable=False),
    sa.Column('holiday_country', sa.Text(), nullable=True),
    sa.Column('holiday_subdiv', sa.Text(), nullable=True),
    sa.Column('max_concurrent_sessions', sa.Integer(), server_default=sa.text('1'), nullable=True),
    sa.Column('cutoff_minutes', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('enabled', sa.Boolean(), server_default=sa.text('true'), nullable=False),
    sa.Column('paused_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('pause_reason', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint('cutoff_minutes >= 0', name='portals_cutoff_nonnegative'),
    sa.CheckConstraint('max_concurrent_sessions > 0', name='portals_max_sessions_positive'),
    sa.PrimaryKeyConstraint('code')
    )
    op.create_table('escalations',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('job_id', sa.BigInteger(), nullable=False),
    sa.Column('attempt', sa.SmallInteger(), nullable=False),
    sa.Column('kind', sa.Text(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('send_attempts', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('next_try_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_send_error', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['job_id'], ['job_queue.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('job_id', 'attempt', 'kind', name='escalations_once')
    )
    op.create_index('escalations_unsent', 'escalations', ['next_try_at'], unique=False, postgresql_where=sa.text('sent_at IS NULL'))
    op.create_table('job_artifacts',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('job_id', sa.BigInteger(), nullable=False),
    sa.Column('attempt', sa.SmallInteger(), nullable=False),
    sa.Column('kind', sa.Text(), nullable=False),
    sa.Column('path', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['job_queue.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('job_artifacts_job', 'job_artifacts', ['job_id', 'attempt'], unique=False)
    op.create_table('job_documents',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('job_id', sa.BigInteger(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('content_type', sa.Text(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['job_queue.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('job_id', 'name', name='job_documents_name')
    )
    op.create_table('job_events',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('job_id', sa.BigInteger(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('attempt', sa.SmallInteger(), nullable=False),
    sa.Column('from_status', sa.Text(), nullable=True),
    sa.Column('to_status', sa.Text(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('worker', sa.Text(), nullable=True),
    sa.Column('detail', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.ForeignKeyConstraint(['job_id'], ['job_queue.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('job_events_job', 'job_events', ['job_id', 'id'], unique=False)
    op.create_table('portal_closures',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('portal', sa.Text(), nullable=False),
    sa.Column('starts_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ends_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint('ends_at > starts_at', name='portal_closures_order'),
    sa.ForeignKeyConstraint(['portal'], ['portals.code'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('portal_closures_portal', 'portal_closures', ['portal', 'ends_at'], unique=False)
    op.create_table('portal_hours',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('portal', sa.Text(), nullable=False),
    sa.Column('weekday', sa.SmallInteger(), nullable=False),
    sa.Column('opens', sa.Time(), nullable=False),
    sa.Column('closes', sa.Time(), nullable=False),
    sa.CheckConstraint('weekday BETWEEN 0 AND 6', name='portal_hours_weekday'),
    sa.ForeignKeyConstraint(['portal'], ['portals.code'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('portal_hours_portal', 'portal_hours', ['portal'], unique=False)

    # a committed enqueue wakes idle workers at once (NOTIFY is delivered on commit;
    # one notification per statement, however many rows it inserted)
    op.execute("""
        CREATE FUNCTION portalq_notify_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('portalq_jobs', 'enqueue');
            RETURN NULL;
        END $$""")
    op.execute("""
        CREATE TRIGGER job_queue_notify AFTER INSERT ON job_queue
        FOR EACH STATEMENT EXECUTE FUNCTION portalq_notify_enqueue()""")

def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS job_queue_notify ON job_queue")
    op.execute("DROP FUNCTION IF EXISTS portalq_notify_enqueue()")
    op.drop_index('portal_hours_portal', table_name='portal_hours')
    op.drop_table('portal_hours')
    op.drop_index('portal_closures_portal', table_name='portal_closures')
    op.drop_table('portal_closures')
    op.drop_index('job_events_job', table_name='job_events')
    op.drop_table('job_events')
    op.drop_table('job_documents')
    op.drop_index('job_artifacts_job', table_name='job_artifacts')
    op.drop_table('job_artifacts')
    op.drop_index('escalations_unsent', table_name='escalations', postgresql_where=sa.text('sent_at IS NULL'))
    op.drop_table('escalations')
    op.drop_table('portals')
    op.drop_index('job_queue_running', table_name='job_queue', postgresql_where=sa.text("status = 'running'"))
    op.drop_index('job_queue_rate', table_name='job_queue', postgresql_where=sa.text('rate_key IS NOT NULL'))
    op.drop_index('job_queue_order', table_name='job_queue')
    op.drop_index('job_queue_finished', table_name='job_queue', postgresql_where=sa.text("status IN ('completed','cancelled')"))
    op.drop_index('job_queue_claim', table_name='job_queue', postgresql_where=sa.text("status IN ('pending','deferred')"))
    op.drop_table('job_queue')
