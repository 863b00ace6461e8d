-- Every statement portalq runs against its tables, by name. Loaded by jobs/sql/__init__.py.
-- Parameters are psycopg named placeholders; the instant is always passed in (%(now)s),
-- never taken from the server, so one clock rules everything (jobs/clock.py).

-- name: enqueue_many
-- Insert jobs (arrays, one element per job); an existing idempotency key inserts nothing.
-- No event row: the job row is its own creation record (see job_events). The portal check
-- is part of the statement (no extra round trip): if any job names an unknown portal, nothing is
-- inserted and each unknown portal comes back as a row with unknown_portal set.
WITH new AS (
    SELECT * FROM unnest(
        %(job_type)s::text[], %(order_id)s::text[], %(portal)s::text[], %(payload)s::jsonb[],
        %(priority)s::smallint[], %(run_at)s::timestamptz[], %(max_attempts)s::smallint[],
        %(idempotency_key)s::text[], %(rate_key)s::text[], %(secret_key_id)s::text[],
        %(secret_dek)s::bytea[], %(secret_data)s::bytea[]
    ) WITH ORDINALITY AS n(job_type, order_id, portal, payload, priority, run_at,
                          max_attempts, idempotency_key, rate_key, secret_key_id,
                          secret_dek, secret_data, ord)
), unknown AS (
    SELECT DISTINCT n.portal FROM new n
    WHERE NOT EXISTS (SELECT 1 FROM portals p WHERE p.code = n.portal)
), ins AS (
    INSERT INTO job_queue (job_type, order_id, portal, payload, status, priority, run_at,
                           max_attempts, idempotency_key, rate_key, created_at, updated_at,
                           secret_key_id, secret_dek, secret_data)
    SELECT job_type, order_id, portal, payload, 'pending', priority, run_at,
           max_attempts, idempotency_key, rate_key, %(now)s, %(now)s,
           secret_key_id, secret_dek, secret_data
    FROM new WHERE NOT EXISTS (SELECT 1 FROM unknown) ORDER BY ord
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, status, idempotency_key
)
SELECT id, idempotency_key, NULL::text AS unknown_portal FROM ins
UNION ALL
SELECT NULL, NULL, portal FROM unknown;

-- name: enqueue_one
-- enqueue_many for one job: a plain INSERT with scalar parameters. No row back: the portal
-- is unknown, or the idempotency key exists (jobs.queue tells which).
INSERT INTO job_queue (job_type, order_id, portal, payload, status, priority, run_at,
                       max_attempts, idempotency_key, rate_key, created_at, updated_at,
                       secret_key_id, secret_dek, secret_data)
SELECT %(job_type)s, %(order_id)s, %(portal)s, %(payload)s::jsonb, 'pending',
       %(priority)s::smallint, %(run_at)s::timestamptz, %(max_attempts)s::smallint,
       %(idempotency_key)s::text, %(rate_key)s::text, %(now)s, %(now)s,
       %(secret_key_id)s::text, %(secret_dek)s::bytea, %(secret_data)s::bytea
WHERE EXISTS (SELECT 1 FROM portals WHERE code = %(portal)s)
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id;

-- name: enqueue_one_known
-- enqueue_one for a portal this connection has already seen exist (portals are never
-- deleted or renamed, migration 0008): no portal check. No row back: the key exists.
INSERT INTO job_queue (job_type, order_id, portal, payload, status, priority, run_at,
                       max_attempts, idempotency_key, rate_key, created_at, updated_at,
                       secret_key_id, secret_dek, secret_data)
VALUES (%(job_type)s, %(order_id)s, %(portal)s, %(payload)s::jsonb, 'pending',
        %(priority)s::smallint, %(run_at)s::timestamptz, %(max_attempts)s::smallint,
        %(idempotency_key)s::text, %(rate_key)s::text, %(now)s, %(now)s,
        %(secret_key_id)s::text, %(secret_dek)s::bytea, %(secret_data)s::bytea)
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id;

-- name: next_job_ids
-- Ids for a COPY of new jobs (enqueue_copy), taken from job_queue's identity sequence.
-- (the sequence is named, not looked up per row: pg_get_serial_sequence would be evaluated
-- once per id and cost more than the COPY itself)
SELECT array_agg(nextval('job_queue_id_seq'::regclass)) FROM generate_series(1, %(n)s::int);

-- name: portals_named
SELECT code FROM portals WHERE code = ANY(%(codes)s::text[]);

-- name: enqueue_copy
-- Bulk enqueue of jobs without idempotency keys (jobs.queue.enqueue_many): binary COPY,
-- one statement (atomic on its own), ids from next_job_ids; fires the NOTIFY trigger once.
-- payload is passed as JSON text (sql.copy_in json_text=True).
COPY job_queue (id, job_type, order_id, portal, payload, status, priority, run_at,
                max_attempts, rate_key, created_at, updated_at, secret_key_id, secret_dek,
                secret_data) FROM STDIN (FORMAT BINARY);

-- name: ids_by_idempotency_key
SELECT id, idempotency_key, job_type FROM job_queue WHERE idempotency_key = ANY(%(keys)s::text[]);

-- name: claim
-- Claim due jobs: per open portal at most its capacity, by priority then run_at; one
-- statement, run on its own (autocommit). A portal's capacity is %(limit)s, or for a
-- limited one (limits[i] not NULL) its limit minus the jobs running on it everywhere,
-- counted by portalq_running_locked (migration 0006) after it took the portal's claim
-- lock: that count is current although this statement's snapshot is older, and jobs
-- claimed by others since are skipped by FOR UPDATE SKIP LOCKED's re-check of the status.
-- portals[] is sorted (locks are always taken in one order: no deadlock between nodes).
-- %(job_types)s: NULL, or the only job types this node takes (its role).
WITH caps AS MATERIALIZED (
    SELECT c.portal,
           CASE WHEN c.lim IS NULL THEN %(limit)s
                ELSE least(%(limit)s, c.lim - portalq_running_locked(c.portal))
           END AS cap
    FROM unnest(%(portals)s::text[], %(limits)s::int[]) WITH ORDINALITY AS c(portal, lim, ord)
    ORDER BY c.ord
), picked AS (
    SELECT j.id, j.status FROM caps CROSS JOIN LATERAL (
        SELECT q.id, q.status FROM job_queue q
        WHERE q.portal = caps.portal
          AND q.status IN ('pending', 'deferred')
          AND q.run_at <= %(now)s
          AND (%(job_types)s::text[] IS NULL OR q.job_type = ANY(%(job_types)s::text[]))
        ORDER BY q.priority DESC, q.run_at, q.id
        LIMIT greatest(caps.cap, 0)
        FOR UPDATE SKIP LOCKED
    ) j
    LIMIT %(limit)s
), upd AS (
    UPDATE job_queue q
    SET status = 'running', attempts = q.attempts + 1, lock_owner = %(worker)s,
        heartbeat_at = %(now)s, started_at = %(now)s, updated_at = %(now)s
    FROM picked WHERE q.id = picked.id
    RETURNING q.id, q.job_type, q.order_id, q.portal, q.payload, q.priority, q.run_at,
              q.attempts, q.max_attempts, q.checkpoint, q.created_at, q.rate_key,
              q.crashes, q.probe_failures, q.secret_key_id, q.secret_dek, q.secret_data,
              picked.status AS from_status
), ev AS (
    INSERT INTO job_events (job_id, at, attempt, from_status, to_status, worker)
    SELECT id, %(now)s, attempts, from_status, 'running', %(worker)s FROM upd
)
SELECT * FROM upd;

-- name: unclaim
-- A claim that could not be completed (its rate-limit checks failed): the jobs go back to
-- the queue as if never claimed (attempt refunded, not started).
WITH upd AS (
    UPDATE job_queue SET status = 'pending', attempts = attempts - 1, lock_owner = NULL,
                         heartbeat_at = NULL, started_at = NULL, updated_at = %(now)s
    WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running' AND lock_owner = %(worker)s
    RETURNING id, attempts
), ev AS (
    INSERT INTO job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, 'running', 'pending', %(worker)s,
           '{"event": "claim undone"}'::jsonb FROM upd
)
SELECT id FROM upd;

-- name: lock_rate_key
SELECT pg_advisory_xact_lock(726202, hashtext(%(rate_key)s));

-- name: rate_count
-- Other jobs with this key that reached the portal during this portal day.
SELECT count(*)::int AS n FROM job_queue
WHERE portal = %(portal)s AND rate_key = %(rate_key)s AND id <> %(id)s
  AND started_at >= %(day_start)s AND started_at < %(day_end)s;

-- name: rate_defer
-- Over its per-key limit: back to deferred until the limit allows, attempt refunded.
WITH upd AS (
    UPDATE job_queue SET status = 'deferred', run_at = %(run_at)s, attempts = attempts - 1,
        started_at = NULL, lock_owner = NULL, heartbeat_at = NULL, updated_at = %(now)s
    WHERE id = %(id)s AND lock_owner = %(worker)s AND status = 'running'
    RETURNING id, attempts
), ev AS (
    INSERT INTO job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, 'running', 'deferred', %(worker)s,
           '{"event": "rate limit: one per key per portal day"}'::jsonb FROM upd
)
SELECT id FROM upd;

-- name: complete_many
WITH done AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(results)s::jsonb[]) AS d(id, result)
), upd AS (
    UPDATE job_queue q
    SET status = 'completed', result = done.result, finished_at = %(now)s,
        updated_at = %(now)s, lock_owner = NULL, heartbeat_at = NULL, last_error = NULL,
        -- crypto-shredding: the job's sealed secrets go with its completion
        secret_key_id = NULL, secret_dek = NULL, secret_data = NULL,
        secrets_erased_at = CASE WHEN q.secret_data IS NULL THEN q.secrets_erased_at
                                 ELSE %(now)s END
    FROM done
    WHERE q.id = done.id AND q.status = 'running' AND q.lock_owner = %(worker)s
    RETURNING q.id, q.attempts, q.portal
), ev AS (
    INSERT INTO job_events (job_id, at, attempt, from_status, to_status, worker)
    SELECT id, %(now)s, attempts, 'running', 'completed', %(worker)s FROM upd
), before AS (
    SELECT code, paused_by FROM portals WHERE code IN (SELECT portal FROM upd)
), healthy AS (
    -- a success ends an outage streak, and resumes a portal the breaker paused
    UPDATE portals p SET outage_streak = 0, outage_last_job = NULL, paused_at = NULL,
                         paused_by = NULL,
                         pause_reason = NULL, probe_at = NULL, updated_at = %(now)s
    FROM before b
    WHERE p.code = b.code AND (p.outage_streak > 0 OR p.paused_by = 'breaker')
      AND p.paused_by IS DISTINCT FROM 'operator'
    RETURNING p.code, b.paused_by AS was_paused_by
), signs AS (
    DELETE FROM portal_outage_signs s USING healthy h WHERE s.portal = h.code
), resumed AS (
    INSERT INTO portal_notices (portal, kind, reason, created_at, next_try_at)
    SELECT code, 'resumed', 'a probe job succeeded', %(now)s, %(now)s
    FROM healthy WHERE was_paused_by = 'breaker'
    RETURNING portal
), told AS (
    SELECT pg_notify('portalq_portals', portal) FROM resumed
)
SELECT id, (SELECT count(*) FROM told) AS resumed FROM upd;

-- name: finish_unsuccessful
-- Retry (pending at %(run_at)s), defer (no attempt spent) or fail one running job.
WITH upd AS (
    UPDATE job_queue q
    SET status = %(status)s, run_at = coalesce(%(run_at)s, q.run_at),
        attempts = q.attempts - %(refund)s::int,
        probe_failures = q.probe_failures + %(probe)s::int,
        last_error = %(error)s, updated_at = %(now)s, lock_owner = NULL, heartbeat_at = NULL,
        finished_at = CASE WHEN %(status)s = 'failed' THEN %(now)s END
    WHERE q.id = %(id)s AND q.status = 'running' AND q.lock_owner = %(worker)s
    RETURNING q.id, q.attempts
), ev AS (
    INSERT INTO job_events (job_id, at, attempt, from_status, to_status, error, worker, detail)
    SELECT id, %(now)s, attempts, 'running', %(status)s, %(error)s, %(worker)s, %(detail)s::jsonb
    FROM upd
)
SELECT id, attempts FROM upd;

-- name: insert_escalation
INSERT INTO escalations (job_id, attempt, kind, reason, created_at, next_try_at)
VALUES (%(job_id)s, %(attempt)s, %(kind)s, %(reason)s, %(now)s, %(now)s)
ON CONFLICT ON CONSTRAINT escalations_once DO NOTHING
RETURNING id;

-- name: heartbeat
UPDATE job_queue SET heartbeat_at = %(now)s
WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running' AND lock_owner = %(worker)s
RETURNING id;

-- name: save_checkpoint
UPDATE job_queue SET checkpoint = checkpoint || %(data)s::jsonb, heartbeat_at = %(now)s,
                     updated_at = %(now)s
WHERE id = %(id)s AND status = 'running' AND lock_owner = %(worker)s
RETURNING checkpoint;

-- name: release
-- Graceful shutdown: unfinished jobs go back to the queue, the attempt refunded.
WITH upd AS (
    UPDATE job_queue SET status = 'pending', attempts = attempts - 1, lock_owner = NULL,
                         heartbeat_at = NULL, updated_at = %(now)s
    WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running' AND lock_owner = %(worker)s
    RETURNING id, attempts
), ev AS (
    INSERT INTO job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, 'running', 'pending', %(worker)s,
           '{"event": "released at shutdown"}'::jsonb FROM upd
)
SELECT id FROM upd;

-- name: stale_running
-- Running jobs whose worker stopped heart-beating (candidates; each is locked and
-- re-checked by lock_stale in a transaction of its own). A heartbeat counts from the later
-- of its time and the server's start: after a PostgreSQL restart every node lost its
-- connection, and gets the stale time from the restart to reconnect and heart-beat again
-- before its jobs count as abandoned.
SELECT id, job_type, lock_owner, heartbeat_at FROM job_queue
WHERE status = 'running' AND heartbeat_at < %(stale_before)s
  AND pg_postmaster_start_time() < %(stale_before)s
ORDER BY heartbeat_at
LIMIT %(limit)s;

-- name: lock_stale
SELECT id, job_type, attempts, max_attempts, checkpoint, crashes FROM job_queue
WHERE id = %(id)s AND status = 'running' AND heartbeat_at = %(heartbeat_at)s
FOR UPDATE SKIP LOCKED;

-- name: rescue
-- A crash is not the job's fault: the attempt is refunded and the crash counted. A job
-- back in the queue goes behind the jobs already due (run_at: now + 2^crashes s), so the
-- same oldest jobs are not the ones in flight at every restart of a crash-looping node.
WITH upd AS (
    UPDATE job_queue SET status = %(status)s, lock_owner = NULL, heartbeat_at = NULL,
        run_at = CASE WHEN %(status)s = 'pending'
                      THEN %(now)s + make_interval(secs => power(2, least(crashes + 1, 10)))
                      ELSE run_at END,
        attempts = greatest(attempts - 1, 0), crashes = crashes + 1,
        last_error = %(error)s, updated_at = %(now)s,
        finished_at = CASE WHEN %(status)s = 'failed' THEN %(now)s END
    WHERE id = %(id)s AND status = 'running'
    RETURNING id, attempts, crashes
), ev AS (
    INSERT INTO job_events (job_id, at, attempt, from_status, to_status, error, worker, detail)
    SELECT id, %(now)s, attempts + 1, 'running', %(status)s, %(error)s, %(worker)s,
           jsonb_build_object('event', 'rescued', 'crash', crashes) FROM upd
)
SELECT id, attempts, crashes FROM upd;

-- name: rescue_skipped
-- A stale job the rescuer could not handle: said on the job; the others proceed.
UPDATE job_queue SET last_error = %(error)s, updated_at = %(now)s
WHERE id = %(id)s AND status = 'running';

-- name: defer_portal
-- Bulk deferral of one closed portal's due jobs to its next opening (no attempt spent).
-- A skip scan of the claim index: one probe per distinct priority of the portal's waiting
-- jobs, then per priority an index range on run_at, so jobs already deferred to a later
-- opening (however many) are never visited.
WITH RECURSIVE prio AS (
    (SELECT q.priority FROM job_queue q
     WHERE q.portal = %(portal)s AND q.status IN ('pending', 'deferred')
     ORDER BY q.priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT q.priority FROM job_queue q
            WHERE q.portal = %(portal)s AND q.status IN ('pending', 'deferred')
              AND q.priority < prio.priority
            ORDER BY q.priority DESC LIMIT 1)
    FROM prio WHERE prio.priority IS NOT NULL
), due AS (
    SELECT j.id FROM prio CROSS JOIN LATERAL (
        SELECT q.id FROM job_queue q
        WHERE q.portal = %(portal)s AND q.priority = prio.priority
          AND q.status IN ('pending', 'deferred')
          AND q.run_at < %(next_open)s AND q.run_at <= %(now)s
    ) j
    WHERE prio.priority IS NOT NULL
), upd AS (
    UPDATE job_queue q SET status = 'deferred', run_at = %(next_open)s, updated_at = %(now)s
    FROM due
    WHERE q.id = due.id AND q.status IN ('pending', 'deferred') AND q.run_at < %(next_open)s
    RETURNING q.id, q.attempts
), ev AS (
    INSERT INTO job_events (job_id, at, attempt, from_status, to_status, detail)
    SELECT id, %(now)s, attempts, 'pending', 'deferred', %(detail)s::jsonb FROM upd
)
SELECT count(*)::int AS deferred FROM upd;

-- name: cancel
WITH upd AS (
    UPDATE job_queue SET status = 'cancelled', finished_at = %(now)s, updated_at = %(now)s,
        secret_key_id = NULL, secret_dek = NULL, secret_data = NULL,
        secrets_erased_at = CASE WHEN secret_data IS NULL THEN secrets_erased_at
                                 ELSE %(now)s END
    WHERE id = %(id)s AND status IN ('pending', 'deferred', 'failed')
    RETURNING id, attempts, %(from)s::text AS from_status
), ev AS (
    INSERT INTO job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, from_status, 'cancelled', %(actor)s,
           '{"event": "admin cancel"}'::jsonb FROM upd
)
SELECT id FROM upd;

-- name: admin_retry
-- A failed (or cancelled) job back to the queue with a fresh attempt budget; checkpoints kept.
WITH upd AS (
    UPDATE job_queue SET status = 'pending', run_at = %(now)s, updated_at = %(now)s,
        max_attempts = attempts + %(extra_attempts)s, finished_at = NULL,
        payload = coalesce(%(payload)s::jsonb, payload),
        secret_key_id = CASE WHEN %(payload)s::jsonb IS NULL THEN secret_key_id
                             ELSE %(secret_key_id)s::text END,
        secret_dek = CASE WHEN %(payload)s::jsonb IS NULL THEN secret_dek
                          ELSE %(secret_dek)s::bytea END,
        secret_data = CASE WHEN %(payload)s::jsonb IS NULL THEN secret_data
                           ELSE %(secret_data)s::bytea END,
        secrets_erased_at = CASE WHEN %(payload)s::jsonb IS NULL THEN secrets_erased_at END,
        checkpoint = (checkpoint - %(drop_checkpoint)s::text[]) || %(checkpoint)s::jsonb
    WHERE id = %(id)s AND status IN ('failed', 'cancelled')
    RETURNING id, attempts, %(from)s::text AS from_status
), ev AS (
    INSERT INTO job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, from_status, 'pending', %(actor)s, %(detail)s::jsonb FROM upd
)
SELECT id FROM upd;

-- name: admin_complete
-- An admin confirms a failed (uncertain) job did reach the portal: completed with that output.
WITH upd AS (
    UPDATE job_queue SET status = 'completed', result = %(result)s::jsonb,
        finished_at = %(now)s, updated_at = %(now)s,
        secret_key_id = NULL, secret_dek = NULL, secret_data = NULL,
        secrets_erased_at = CASE WHEN secret_data IS NULL THEN secrets_erased_at
                                 ELSE %(now)s END
    WHERE id = %(id)s AND status = 'failed'
    RETURNING id, attempts
), ev AS (
    INSERT INTO job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, 'failed', 'completed', %(actor)s, %(detail)s::jsonb FROM upd
)
SELECT id FROM upd;

-- name: notify
SELECT pg_notify('portalq_jobs', %(reason)s);

-- name: get_job
SELECT * FROM job_queue WHERE id = %(id)s;

-- name: get_job_for_update
SELECT * FROM job_queue WHERE id = %(id)s FOR UPDATE;

-- name: job_events
-- The job's history: its creation (derived from the job row, which is its own creation
-- record: no event row is written on enqueue), then one row per transition.
SELECT at, attempt, from_status, to_status, error, worker, detail FROM (
    SELECT 0 AS seq, created_at AS at, 0::smallint AS attempt, NULL::text AS from_status,
           'pending'::text AS to_status, NULL::text AS error, NULL::text AS worker,
           '{"event": "enqueued"}'::jsonb AS detail
    FROM job_queue WHERE id = %(id)s
    UNION ALL
    SELECT id, at, attempt, from_status, to_status, error, worker, detail FROM job_events
    WHERE job_id = %(id)s
) h ORDER BY seq;

-- name: job_artifacts
SELECT attempt, kind, path, note, created_at FROM job_artifacts WHERE job_id = %(id)s ORDER BY id;

-- name: add_artifact
INSERT INTO job_artifacts (job_id, attempt, kind, path, note, created_at)
VALUES (%(job_id)s, %(attempt)s, %(kind)s, %(path)s, %(note)s, %(now)s);

-- name: list_jobs
SELECT id, job_type, order_id, portal, status, priority, run_at, attempts, max_attempts,
       last_error, created_at, updated_at
FROM job_queue
WHERE (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(portal)s::text IS NULL OR portal = %(portal)s)
  AND (%(order_id)s::text IS NULL OR order_id = %(order_id)s)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: count_by_portal_status
SELECT portal, status, count(*)::int AS n FROM job_queue GROUP BY portal, status
ORDER BY portal, status;

-- name: status_running
SELECT id, job_type, order_id, portal, attempts, started_at,
       coalesce(checkpoint->>'step', checkpoint->>'stage') AS step
FROM job_queue WHERE status = 'running' ORDER BY started_at LIMIT 20;

-- name: status_deferred
SELECT id, job_type, order_id, portal, run_at FROM job_queue
WHERE status = 'deferred' ORDER BY run_at, id LIMIT 10;

-- name: status_failures
SELECT j.id, j.job_type, j.order_id, j.attempts, j.last_error, j.finished_at,
       bool_or(e.sent_at IS NOT NULL) AS mailed
FROM job_queue j LEFT JOIN escalations e ON e.job_id = j.id
WHERE j.status = 'failed'
GROUP BY j.id ORDER BY j.finished_at DESC NULLS LAST LIMIT 10;

-- name: unsent_mail
-- Escalations and portal notices not mailed yet (the demo exits only when none is left).
SELECT (SELECT count(*) FROM escalations WHERE sent_at IS NULL)
     + (SELECT count(*) FROM portal_notices WHERE sent_at IS NULL) AS n;

-- name: store_document
INSERT INTO job_documents (job_id, name, content_type, data, key_id, created_at)
VALUES (%(job_id)s, %(name)s, %(content_type)s, %(data)s, %(key_id)s, %(now)s)
ON CONFLICT ON CONSTRAINT job_documents_name
DO UPDATE SET content_type = EXCLUDED.content_type, data = EXCLUDED.data,
              key_id = EXCLUDED.key_id;

-- name: documents_of
SELECT name, content_type, data, key_id FROM job_documents WHERE job_id = %(job_id)s ORDER BY id;

-- name: document_names
SELECT name, content_type, length(data) AS size FROM job_documents
WHERE job_id = %(job_id)s ORDER BY id;

-- name: due_escalations
SELECT e.id, e.job_id, e.attempt, e.kind, e.reason, e.send_attempts,
       j.job_type, j.order_id, j.portal, j.attempts, j.max_attempts, j.last_error,
       j.checkpoint, j.status
FROM escalations e JOIN job_queue j ON j.id = e.job_id
WHERE e.sent_at IS NULL AND e.next_try_at <= %(now)s AND e.id <> ALL(%(skip)s::bigint[])
ORDER BY e.id
LIMIT %(limit)s
FOR UPDATE OF e SKIP LOCKED;

-- name: escalation_sent
UPDATE escalations SET sent_at = %(now)s, send_attempts = send_attempts + 1
WHERE id = %(id)s;

-- name: escalation_send_failed
UPDATE escalations SET send_attempts = send_attempts + 1, last_send_error = %(error)s,
                       next_try_at = %(next_try_at)s
WHERE id = %(id)s;

-- name: erase_failed_secrets
-- Crypto-shredding of failed jobs' sealed secrets once they have waited %(before)s for an
-- admin retry (completed and cancelled jobs lose theirs at once: complete_many, cancel).
WITH upd AS (
    UPDATE job_queue SET secret_key_id = NULL, secret_dek = NULL, secret_data = NULL,
                         secrets_erased_at = %(now)s
    WHERE id IN (SELECT id FROM job_queue
                 WHERE status = 'failed' AND finished_at < %(before)s
                   AND secret_data IS NOT NULL
                 LIMIT %(limit)s)
    RETURNING id
)
SELECT count(*)::int AS erased FROM upd;

-- name: sealed_rows
-- Rotation: the next sealed jobs (by id) whose data key is wrapped by another KEK.
SELECT id, secret_key_id, secret_dek FROM job_queue
WHERE id > %(after)s AND secret_key_id IS NOT NULL AND secret_key_id <> %(current)s
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: rewrap_rows
-- Rotation: new wrappings of the same data keys (only rows still wrapped by the old KEK).
UPDATE job_queue q SET secret_key_id = n.key_id, secret_dek = n.dek
FROM unnest(%(ids)s::bigint[], %(old)s::text[], %(key_ids)s::text[], %(deks)s::bytea[])
     AS n(id, old, key_id, dek)
WHERE q.id = n.id AND q.secret_key_id = n.old;

-- name: sealed_documents
SELECT id, key_id, data FROM job_documents
WHERE id > %(after)s AND key_id IS NOT NULL AND key_id <> %(current)s
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: rewrap_documents
UPDATE job_documents d SET key_id = n.key_id, data = n.data
FROM unnest(%(ids)s::bigint[], %(old)s::text[], %(key_ids)s::text[], %(datas)s::bytea[])
     AS n(id, old, key_id, data)
WHERE d.id = n.id AND d.key_id = n.old;

-- name: legacy_secret_rows
-- Jobs of types with secret fields enqueued before they were sealed (migration 0012).
SELECT id, job_type, payload FROM job_queue
WHERE job_type = ANY(%(types)s::text[]) AND id > %(after)s AND secret_key_id IS NULL
  AND secrets_erased_at IS NULL AND status IN ('pending', 'deferred', 'failed')
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: seal_legacy_row
UPDATE job_queue SET payload = %(payload)s::jsonb, secret_key_id = %(key_id)s,
                     secret_dek = %(dek)s, secret_data = %(data)s
WHERE id = %(id)s AND secret_key_id IS NULL;

-- name: sealed_checkpoints
-- Rotation: jobs whose checkpoint holds a value sealed under another KEK
-- ("pqsealed1:<key id>:...", jobs/secrets_at_rest.py).
SELECT id, checkpoint FROM job_queue q
WHERE id > %(after)s AND EXISTS (
    SELECT 1 FROM jsonb_each_text(q.checkpoint) e
    WHERE starts_with(e.value, 'pqsealed1:') AND split_part(e.value, ':', 2) <> %(current)s)
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: rewrap_checkpoint
UPDATE job_queue SET checkpoint = checkpoint || %(patch)s::jsonb WHERE id = %(id)s;

-- name: key_usage
-- How many stored values each KEK wraps (portalq keys status / retire).
SELECT key_id, sum(n)::int AS n FROM (
    SELECT secret_key_id AS key_id, count(*) AS n FROM job_queue
    WHERE secret_key_id IS NOT NULL GROUP BY secret_key_id
    UNION ALL
    SELECT key_id, count(*) FROM job_documents WHERE key_id IS NOT NULL GROUP BY key_id
    UNION ALL
    SELECT split_part(e.value, ':', 2), count(*)
    FROM job_queue q CROSS JOIN LATERAL jsonb_each_text(q.checkpoint) e
    WHERE starts_with(e.value, 'pqsealed1:') GROUP BY 1
) u GROUP BY key_id ORDER BY key_id;

-- name: prune_finished
-- Completed/cancelled jobs finished before %(before)s, failed ones before
-- %(failed_before)s, with their events (job_events has no
-- foreign key); artifacts, documents and escalations go by ON DELETE CASCADE.
WITH gone AS (
    DELETE FROM job_queue WHERE id IN (
        (SELECT id FROM job_queue
         WHERE status IN ('completed', 'cancelled') AND finished_at < %(before)s
         LIMIT %(limit)s)
        UNION ALL
        (SELECT id FROM job_queue
         WHERE status = 'failed' AND finished_at < %(failed_before)s
         LIMIT %(limit)s))
    RETURNING id
), events AS (
    DELETE FROM job_events WHERE job_id IN (SELECT id FROM gone)
)
SELECT count(*)::int AS pruned FROM gone;

-- name: prune_candidates
-- What prune_finished deletes, one by one (after a batch that could not be deleted).
(SELECT id FROM job_queue
 WHERE status IN ('completed', 'cancelled') AND finished_at < %(before)s
 LIMIT %(limit)s)
UNION ALL
(SELECT id FROM job_queue
 WHERE status = 'failed' AND finished_at < %(failed_before)s
 LIMIT %(limit)s);

-- name: prune_one
WITH gone AS (
    DELETE FROM job_queue WHERE id = %(id)s RETURNING id
), events AS (
    DELETE FROM job_events WHERE job_id IN (SELECT id FROM gone)
)
SELECT count(*)::int AS pruned FROM gone;

-- name: list_portals
SELECT code, name, timezone, holiday_country, holiday_subdiv, max_concurrent_sessions,
       cutoff_minutes, enabled, paused_at, pause_reason, paused_by, probe_at, outage_streak
FROM portals ORDER BY code;

-- name: portal_holidays
-- Per portal, the years whose holidays portal_holidays holds (first..last) and those days,
-- in one statement (one snapshot: a refresh in between cannot pair new years with old
-- days). Only portals whose stored holidays are for their current region.
SELECT p.code AS portal, p.holidays_from AS first, p.holidays_to AS last,
       coalesce(array_agg(h.day ORDER BY h.day) FILTER (WHERE h.day IS NOT NULL),
                '{}') AS days
FROM portals p LEFT JOIN portal_holidays h ON h.portal = p.code
WHERE p.holidays_region = p.holiday_country || '/' || coalesce(p.holiday_subdiv, '')
  AND p.holidays_from IS NOT NULL AND p.holidays_to IS NOT NULL
GROUP BY p.code, p.holidays_from, p.holidays_to
ORDER BY p.code;

-- name: holidays_due
-- Portals with a holiday region whose stored holidays are for another region, or end
-- before %(through)s (a year).
SELECT code, holiday_country, holiday_subdiv FROM portals
WHERE holiday_country IS NOT NULL
  AND (holidays_region IS DISTINCT FROM holiday_country || '/' || coalesce(holiday_subdiv, '')
       OR holidays_to IS NULL OR holidays_to < %(through)s)
ORDER BY code;

-- name: store_holidays
-- Replace one portal's stored holidays with these (years %(first)s..%(last)s of %(region)s).
WITH new AS (
    SELECT * FROM unnest(%(days)s::date[], %(names)s::text[]) AS n(day, name)
), gone AS (
    DELETE FROM portal_holidays h
    WHERE h.portal = %(portal)s AND h.day NOT IN (SELECT day FROM new)
), put AS (
    INSERT INTO portal_holidays (portal, day, name) SELECT %(portal)s, day, name FROM new
    ON CONFLICT (portal, day) DO UPDATE SET name = excluded.name
)
UPDATE portals SET holidays_region = %(region)s, holidays_from = %(first)s::smallint,
                   holidays_to = %(last)s::smallint
WHERE code = %(portal)s;

-- name: portal_hours
SELECT portal, weekday, opens, closes FROM portal_hours ORDER BY portal, weekday, opens;

-- name: portal_closures
SELECT portal, starts_at, ends_at, reason FROM portal_closures
WHERE ends_at > %(after)s ORDER BY portal, starts_at;

-- name: delete_portal_hours
DELETE FROM portal_hours WHERE portal = %(portal)s AND (%(weekday)s::int IS NULL OR weekday = %(weekday)s);

-- name: insert_portal_hours
INSERT INTO portal_hours (portal, weekday, opens, closes)
SELECT %(portal)s, w, o, c FROM unnest(%(weekdays)s::int[], %(opens)s::time[], %(closes)s::time[])
AS h(w, o, c);

-- name: insert_closure
INSERT INTO portal_closures (portal, starts_at, ends_at, reason, created_at)
VALUES (%(portal)s, %(starts_at)s, %(ends_at)s, %(reason)s, %(now)s) RETURNING id;

-- name: touch_portal
UPDATE portals SET updated_at = %(now)s WHERE code = %(portal)s;

-- name: outage_seen
-- One more outage sign from job %(job_id)s; the streak is the number of distinct jobs
-- that showed one since %(since)s (this one included: the same job failing again, or two
-- jobs alternately, never lengthen it past the jobs involved).
WITH sign AS (
    INSERT INTO portal_outage_signs (portal, job_id, seen_at)
    VALUES (%(portal)s, %(job_id)s, %(now)s)
    ON CONFLICT (portal, job_id) DO UPDATE SET seen_at = excluded.seen_at
), old AS (
    DELETE FROM portal_outage_signs WHERE portal = %(portal)s AND seen_at < %(since)s
), recent AS (
    SELECT count(*)::int + 1 AS n FROM portal_outage_signs
    WHERE portal = %(portal)s AND seen_at >= %(since)s AND job_id <> %(job_id)s
)
UPDATE portals SET outage_streak = (SELECT n FROM recent), outage_last_job = %(job_id)s,
                   updated_at = %(now)s
WHERE code = %(portal)s
RETURNING outage_streak, paused_at, paused_by;

-- name: breaker_pause
-- Pause a portal after an outage streak (once: only a running portal is paused) + notice.
WITH p AS (
    UPDATE portals SET paused_at = %(now)s, paused_by = %(by)s, pause_reason = %(reason)s,
                       probe_at = %(probe_at)s, updated_at = %(now)s
    WHERE code = %(portal)s AND paused_at IS NULL
    RETURNING code
)
INSERT INTO portal_notices (portal, kind, reason, created_at, next_try_at)
SELECT code, 'paused', %(reason)s, %(now)s, %(now)s FROM p WHERE %(notify)s
RETURNING id;

-- name: probe_failed
UPDATE portals SET probe_at = %(probe_at)s, updated_at = %(now)s
WHERE code = %(portal)s AND paused_by = 'breaker';

-- name: operator_resume
WITH p AS (
    UPDATE portals SET paused_at = NULL, paused_by = NULL, pause_reason = NULL,
                       probe_at = NULL, outage_streak = 0, outage_last_job = NULL,
                       updated_at = %(now)s
    WHERE code = %(portal)s AND paused_at IS NOT NULL
    RETURNING code
), signs AS (
    DELETE FROM portal_outage_signs s USING p WHERE s.portal = p.code
)
SELECT count(*)::int AS resumed FROM p;

-- name: notify_portals
SELECT pg_notify('portalq_portals', %(portal)s);

-- name: due_notices
SELECT id, portal, kind, reason, send_attempts FROM portal_notices
WHERE sent_at IS NULL AND next_try_at <= %(now)s AND id <> ALL(%(skip)s::bigint[])
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: outbox_next_try
-- When the next unsent escalation or notice is due (NULL: none waits).
SELECT least((SELECT min(next_try_at) FROM escalations WHERE sent_at IS NULL),
             (SELECT min(next_try_at) FROM portal_notices WHERE sent_at IS NULL)) AS at;

-- name: notice_sent
UPDATE portal_notices SET sent_at = %(now)s, send_attempts = send_attempts + 1
WHERE id = %(id)s;

-- name: notice_send_failed
UPDATE portal_notices SET send_attempts = send_attempts + 1, last_send_error = %(error)s,
                          next_try_at = %(next_try_at)s
WHERE id = %(id)s;

-- name: try_leader_lock
SELECT pg_try_advisory_lock(7262010200) AS leader;

-- name: unlock_leader
SELECT pg_advisory_unlock(7262010200);
