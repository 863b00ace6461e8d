-- Every statement portalq runs against its tables, by name. Loaded by jobs/db/sql/__init__.py.
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
        %(secret_dek)s::bytea[], %(secret_data)s::bytea[], %(id)s::bigint[]
    ) WITH ORDINALITY AS n(job_type, order_id, portal, payload, priority, run_at,
                          max_attempts, idempotency_key, rate_key, secret_key_id,
                          secret_dek, secret_data, id, ord)
), unknown AS (
    SELECT DISTINCT n.portal FROM new n
    WHERE NOT EXISTS (SELECT 1 FROM portalq.portals p WHERE p.code = n.portal)
), ins AS (
    INSERT INTO portalq.job_queue (id, job_type, order_id, portal, payload, status, priority, run_at,
                           max_attempts, idempotency_key, rate_key, created_at, updated_at,
                           secret_key_id, secret_dek, secret_data)
    SELECT COALESCE(id, nextval('portalq.job_queue_id_seq'::regclass)), job_type, order_id, portal,
           payload, 'pending', priority, run_at,
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
-- is unknown, or the idempotency key exists (jobs.queue tells which). %(id)s: the id its
-- sealed secrets are bound to (jobs/id_blocks.py), else NULL (the sequence's next).
INSERT INTO portalq.job_queue (id, job_type, order_id, portal, payload, status, priority, run_at,
                       max_attempts, idempotency_key, rate_key, created_at, updated_at,
                       secret_key_id, secret_dek, secret_data)
SELECT COALESCE(%(id)s::bigint, nextval('portalq.job_queue_id_seq'::regclass)), %(job_type)s, %(order_id)s, %(portal)s, %(payload)s::jsonb, 'pending',
       %(priority)s::smallint, %(run_at)s::timestamptz, %(max_attempts)s::smallint,
       %(idempotency_key)s::text, %(rate_key)s::text, %(now)s, %(now)s,
       %(secret_key_id)s::text, %(secret_dek)s::bytea, %(secret_data)s::bytea
WHERE EXISTS (SELECT 1 FROM portalq.portals WHERE code = %(portal)s)
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id;

-- name: enqueue_one_known
-- enqueue_one for a portal this connection has already seen exist (portals are never
-- deleted or renamed, migration 0008): no portal check. No row back: the key exists.
INSERT INTO portalq.job_queue (id, job_type, order_id, portal, payload, status, priority, run_at,
                       max_attempts, idempotency_key, rate_key, created_at, updated_at,
                       secret_key_id, secret_dek, secret_data)
VALUES (COALESCE(%(id)s::bigint, nextval('portalq.job_queue_id_seq'::regclass)), %(job_type)s, %(order_id)s, %(portal)s, %(payload)s::jsonb, 'pending',
        %(priority)s::smallint, %(run_at)s::timestamptz, %(max_attempts)s::smallint,
        %(idempotency_key)s::text, %(rate_key)s::text, %(now)s, %(now)s,
        %(secret_key_id)s::text, %(secret_dek)s::bytea, %(secret_data)s::bytea)
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id;

-- name: next_job_ids
-- Ids for a COPY of new jobs (enqueue_copy), taken from job_queue's identity sequence.
-- (the sequence is named, not looked up per row: pg_get_serial_sequence would be evaluated
-- once per id and cost more than the COPY itself)
SELECT array_agg(nextval('portalq.job_queue_id_seq'::regclass)) FROM generate_series(1, %(n)s::int);

-- name: portals_named
SELECT code FROM portalq.portals WHERE code = ANY(%(codes)s::text[]);

-- name: enqueue_copy
-- Bulk enqueue of jobs without idempotency keys (jobs.queue.enqueue_many): binary COPY,
-- one statement (atomic on its own), ids from next_job_ids; fires the NOTIFY trigger once.
-- payload is passed as JSON text (sql.copy_in json_text=True).
-- The column list is the one place of the columns' order: jobs/enqueue_paths.py reads it
-- and takes each value by its column's name.
-- The WHERE keeps every row (random() is in [0, 1)); it is there because it is volatile:
-- PostgreSQL then stores each row as it arrives instead of buffering rows for one
-- multi-row insert per 1,000 (copyfrom.c: a volatile WHERE means CIM_SINGLE). With the
-- buffer, a batch of up to 1,000 was stored only after its last row, so the client's
-- validation and sealing and the server's index inserts ran one after the other; row by
-- row they overlap (test_enqueue.py::test_the_batch_copy_stores_each_row_as_it_arrives).
COPY portalq.job_queue (id, job_type, order_id, portal, payload, status, priority, run_at,
                max_attempts, rate_key, created_at, updated_at, secret_key_id, secret_dek,
                secret_data) FROM STDIN (FORMAT BINARY) WHERE random() >= 0;

-- name: ids_by_idempotency_key
SELECT id, idempotency_key, job_type FROM portalq.job_queue WHERE idempotency_key = ANY(%(keys)s::text[]);

-- name: adopt_legacy_table
-- A legacy queue to take over (jobs/business/adopt.py): its columns' names, no row when there is
-- no such table or view.
SELECT array_agg(a.attname::text) FILTER (WHERE a.attnum > 0 AND NOT a.attisdropped) AS columns
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
WHERE n.nspname = %(schema)s AND c.relname = %(name)s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
GROUP BY c.oid;

-- name: adopt_legacy_rows
-- Every row of a legacy queue; {table} is its name, composed in as an identifier by
-- jobs/business/adopt.py (psycopg.sql), read in a read-only transaction.
SELECT id, job_type, payload, status, attempts, last_error, run_at, order_id
FROM {table} ORDER BY id;

-- name: adopt_blank_secrets
-- `portalq adopt --blank-secrets`: a legacy row imported into portalq gets its payload back
-- with the secret fields emptied (jobs/business/adopt.py); {table} composed in as an
-- identifier. The one write portalq makes into a legacy table, asked for by name.
UPDATE {table} SET payload = %(payload)s WHERE id = %(id)s;

-- name: adopt_failed
-- A job just imported from a legacy queue (jobs/business/adopt.py, in the import's transaction)
-- that was running or had failed there: failed at once, so no node ever claims it, with
-- its error and, for a running one, its submission in doubt (%(checkpoint)s).
WITH upd AS (
    UPDATE portalq.job_queue
    SET status = 'failed', last_error = %(error)s,
        checkpoint = coalesce(checkpoint, '{}'::jsonb) || %(checkpoint)s::jsonb,
        finished_at = %(now)s, updated_at = %(now)s
    WHERE id = %(id)s AND status = 'pending'
    RETURNING id, attempts
)
INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, error, detail)
SELECT id, %(now)s, attempts, 'pending', 'failed', %(error)s, %(detail)s::jsonb FROM upd
RETURNING job_id;

-- name: claim
-- Claim due jobs: per open portal at most its capacity, by priority then run_at; one
-- statement, run on its own (autocommit). A portal's capacity is %(limit)s, or for a
-- limited one (limits[i] not NULL) its limit minus the jobs running on it everywhere,
-- counted by portalq_running_locked (migration 0006) after it took the portal's claim
-- lock: that count is current although this statement's snapshot is older, and jobs
-- claimed by others since are skipped by FOR UPDATE SKIP LOCKED's re-check of the status.
-- portals[] is sorted (locks are always taken in one order: no deadlock between nodes).
-- %(job_types)s: NULL, or the only job types this node takes (its role).
-- The limit and the number of portals are written into the text (jobs.db.sql.statement), so
-- the prepared claim's generic plan sees them: with the limit a parameter it joined the
-- UPDATE by a sequential scan, and without the count it guessed ten portals and looked
-- dearer than a custom plan, so the server planned every claim anew, at a cost above
-- running it (issue 19).
-- inline: limit, portal_count
WITH caps AS MATERIALIZED (
    SELECT c.portal,
           CASE WHEN c.lim IS NULL THEN %(limit)s
                ELSE least(%(limit)s, c.lim - portalq.portalq_running_locked(c.portal))
           END AS cap,
           -- the job types held for a page their flow does not know (drift_pause)
           (SELECT p.drift_pauses FROM portalq.portals p WHERE p.code = c.portal) AS held
    FROM unnest(%(portals)s::text[], %(limits)s::int[]) WITH ORDINALITY AS c(portal, lim, ord)
    ORDER BY c.ord
    LIMIT %(portal_count)s
), picked AS (
    -- per portal a skip scan of the claim index, as defer_candidates does: one probe per
    -- distinct priority of its waiting jobs, then per priority an index range bounded by
    -- run_at <= now, so jobs waiting for later (a million deferred or scheduled ones) are
    -- never visited (a plain range on the portal would read all of them when few are due)
    SELECT j.id, j.status FROM caps CROSS JOIN LATERAL (
        SELECT d.id, d.status FROM (
            WITH RECURSIVE prio AS (
                (SELECT q.priority FROM portalq.job_queue q
                 WHERE q.portal = caps.portal AND q.status IN ('pending', 'deferred')
                 ORDER BY q.priority DESC LIMIT 1)
                UNION ALL
                SELECT (SELECT q.priority FROM portalq.job_queue q
                        WHERE q.portal = caps.portal AND q.status IN ('pending', 'deferred')
                          AND q.priority < prio.priority
                        ORDER BY q.priority DESC LIMIT 1)
                FROM prio WHERE prio.priority IS NOT NULL
            )
            SELECT priority FROM prio WHERE priority IS NOT NULL ORDER BY priority DESC
        ) p CROSS JOIN LATERAL (
            SELECT q.id, q.status FROM portalq.job_queue q
            WHERE q.portal = caps.portal AND q.priority = p.priority
              AND q.status IN ('pending', 'deferred')
              AND q.run_at <= %(now)s
              AND (%(job_types)s::text[] IS NULL OR q.job_type = ANY(%(job_types)s::text[]))
              AND NOT coalesce(caps.held ? q.job_type, false)
              -- %(key_ids)s: NULL, or the keys this node holds: a sealed job whose key it
              -- lacks is left to a node that has it, never claimed to fail (issue 35)
              AND (%(key_ids)s::text[] IS NULL OR q.secret_key_id IS NULL
                   OR q.secret_key_id = ANY(%(key_ids)s::text[]))
            ORDER BY q.run_at, q.id
            -- the statement's own limit, a value the planner sees: with the portal's cap
            -- here (known only at run time) it planned for a large share of the due jobs,
            -- and beside a long history read all of them by job_queue_waiting_id and
            -- sorted them, many times a claim's usual cost (issue 19). The cap
            -- still holds: rows are locked only as the LIMIT below pulls them.
            LIMIT %(limit)s
            FOR UPDATE SKIP LOCKED
        ) d
        LIMIT greatest(caps.cap, 0)
    ) j
    LIMIT %(limit)s
), upd AS (
    UPDATE portalq.job_queue q
    SET status = 'running', attempts = q.attempts + 1, lock_owner = %(worker)s,
        heartbeat_at = %(now)s, started_at = %(now)s, updated_at = %(now)s
    FROM picked WHERE q.id = picked.id
    RETURNING q.id, q.job_type, q.order_id, q.portal, q.payload, q.priority, q.run_at,
              q.attempts, q.max_attempts, q.checkpoint, q.created_at, q.rate_key,
              q.crashes, q.probe_failures, q.secret_key_id, q.secret_dek, q.secret_data,
              picked.status AS from_status
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, worker)
    SELECT id, %(now)s, attempts, from_status, 'running', %(worker)s FROM upd
)
SELECT * FROM upd ORDER BY priority DESC, run_at, id;   -- the claim's order

-- name: sealed_unopenable
-- A waiting sealed job whose key is not among %(key_ids)s (the node lacks it), if any.
SELECT secret_key_id AS key_id FROM portalq.job_queue
WHERE status IN ('pending', 'deferred') AND secret_key_id IS NOT NULL
  AND NOT (secret_key_id = ANY(%(key_ids)s::text[]))
LIMIT 1;

-- name: unclaim
-- A claim that could not be completed (its rate-limit checks failed): the jobs go back to
-- the queue as if never claimed (attempt refunded, not started).
WITH upd AS (
    UPDATE portalq.job_queue SET status = 'pending', attempts = attempts - 1, lock_owner = NULL,
                         heartbeat_at = NULL, started_at = NULL, updated_at = %(now)s
    WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running' AND lock_owner = %(worker)s
    RETURNING id, attempts
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, 'running', 'pending', %(worker)s,
           '{"event": "claim undone"}'::jsonb FROM upd
)
SELECT id FROM upd;

-- name: lock_rate_keys
-- The per-key locks of one claim's rate checks, held to the end of its transaction. They
-- are taken in one order everywhere, by the lock's own key (two texts can share a hash),
-- so two nodes checking the same keys never wait on each other in a cycle; the sorted
-- subquery is fenced (OFFSET 0) so the locks are taken in its order.
SELECT count(pg_advisory_xact_lock(%(lock)s::int, s.h))::int AS n FROM (
    SELECT DISTINCT hashtext(k) AS h FROM unnest(%(keys)s::text[]) AS k ORDER BY h OFFSET 0
) s;

-- name: rate_defer_over
-- One claim's per-key limits, checked at once under the keys' locks (lock_rate_keys, an
-- earlier statement of the same transaction: this one's snapshot sees every decision
-- committed before the locks were granted). For each (portal, key): the jobs of that key
-- that reached the portal this portal day outside this claim, then this claim's jobs of
-- the key in claim order; those past the limit go back to deferred until the next portal
-- day, their attempt refunded.
WITH c AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(portals)s::text[], %(keys)s::text[],
                         %(limits)s::int[], %(day_starts)s::timestamptz[],
                         %(day_ends)s::timestamptz[])
        WITH ORDINALITY AS c(id, portal, rate_key, lim, day_start, day_end, ord)
), ranked AS (
    SELECT c.id, c.lim, c.day_end,
           row_number() OVER (PARTITION BY c.portal, c.rate_key ORDER BY c.ord) AS rn,
           (SELECT count(*) FROM portalq.job_queue q
            WHERE q.portal = c.portal AND q.rate_key = c.rate_key
              AND q.started_at >= c.day_start AND q.started_at < c.day_end
              AND q.id <> ALL(%(ids)s::bigint[])) AS others
    FROM c
), upd AS (
    UPDATE portalq.job_queue q SET status = 'deferred', run_at = r.day_end, attempts = q.attempts - 1,
        started_at = NULL, lock_owner = NULL, heartbeat_at = NULL, updated_at = %(now)s
    FROM ranked r
    WHERE q.id = r.id AND r.others + r.rn > r.lim
      AND q.lock_owner = %(worker)s AND q.status = 'running'
    RETURNING q.id, q.attempts
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, 'running', 'deferred', %(worker)s,
           '{"event": "rate limit: one per key per portal day"}'::jsonb FROM upd
)
SELECT id FROM upd;

-- name: complete_many
WITH done AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(results)s::jsonb[]) AS d(id, result)
), upd AS (
    UPDATE portalq.job_queue q
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
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, worker)
    SELECT id, %(now)s, attempts, 'running', 'completed', %(worker)s FROM upd
), before AS (
    SELECT code, paused_by FROM portalq.portals WHERE code IN (SELECT portal FROM upd)
), healthy AS (
    -- a success ends an outage streak, and resumes a portal the breaker paused (never
    -- one an operator paused, nor one paused for a changed page: a run that started
    -- before that pause proves nothing about the changed page)
    UPDATE portalq.portals p SET outage_streak = 0, outage_last_job = NULL, paused_at = NULL,
                         paused_by = NULL,
                         pause_reason = NULL, probe_at = NULL, updated_at = %(now)s
    FROM before b
    WHERE p.code = b.code AND (p.outage_streak > 0 OR p.paused_by = 'breaker')
      AND (p.paused_by IS NULL OR p.paused_by = 'breaker')
    RETURNING p.code, b.paused_by AS was_paused_by
), signs AS (
    DELETE FROM portalq.portal_outage_signs s USING healthy h WHERE s.portal = h.code
), resumed AS (
    INSERT INTO portalq.portal_notices (portal, kind, reason, created_at, next_try_at)
    SELECT code, 'resumed', 'a probe job succeeded', %(now)s, %(now)s
    FROM healthy WHERE was_paused_by = 'breaker'
    RETURNING portal
), told AS (
    SELECT pg_notify('portalq_portals', portal) FROM resumed
)
SELECT id, (SELECT count(*) FROM told) AS resumed,
       -- an order's step (issue 41): the steps after it may now be released (order_runs)
       (SELECT s.order_id FROM portalq.order_steps s WHERE s.job_id = upd.id) AS step_of
FROM upd;

-- name: finish_unsuccessful
-- Retry (pending at %(run_at)s), defer (no attempt spent) or fail one running job;
-- %(extra)s: 1 gives it one attempt more than its budget.
WITH upd AS (
    UPDATE portalq.job_queue q
    SET status = %(status)s, run_at = coalesce(%(run_at)s, q.run_at),
        attempts = q.attempts - %(refund)s::int,
        max_attempts = q.max_attempts + %(extra)s::int,
        -- plain keys the outcome sets/drops (a job's one automatic lookup, issue 35)
        checkpoint = CASE WHEN %(cp_patch)s::jsonb IS NULL
                               AND cardinality(%(cp_drop)s::text[]) = 0 THEN q.checkpoint
                          ELSE (q.checkpoint - %(cp_drop)s::text[])
                               || coalesce(%(cp_patch)s::jsonb, '{}'::jsonb) END,
        probe_failures = q.probe_failures + %(probe)s::int,
        last_error = %(error)s, updated_at = %(now)s, lock_owner = NULL, heartbeat_at = NULL,
        finished_at = CASE WHEN %(status)s = 'failed' THEN %(now)s END
    WHERE q.id = %(id)s AND q.status = 'running' AND q.lock_owner = %(worker)s
    RETURNING q.id, q.attempts
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, error, worker, detail)
    SELECT id, %(now)s, attempts, 'running', %(status)s, %(error)s, %(worker)s, %(detail)s::jsonb
    FROM upd
)
SELECT id, attempts FROM upd;

-- name: insert_escalation
INSERT INTO portalq.escalations (job_id, attempt, kind, reason, created_at, next_try_at)
VALUES (%(job_id)s, %(attempt)s, %(kind)s, %(reason)s, %(now)s, %(now)s)
ON CONFLICT ON CONSTRAINT escalations_once DO NOTHING
RETURNING id;

-- name: insert_escalation_again
-- An escalation that can recur within one attempt: a job meeting a changed page again
-- after its portal was resumed (its attempt refunded each time) is numbered after its
-- earlier ones of the kind, so the person is told again.
INSERT INTO portalq.escalations (job_id, attempt, kind, reason, created_at, next_try_at)
SELECT %(job_id)s, greatest(%(attempt)s, coalesce(max(attempt) + 1, %(attempt)s)), %(kind)s,
       %(reason)s, %(now)s, %(now)s
FROM portalq.escalations WHERE job_id = %(job_id)s AND kind = %(kind)s
ON CONFLICT ON CONSTRAINT escalations_once DO NOTHING
RETURNING id;

-- name: heartbeat
UPDATE portalq.job_queue SET heartbeat_at = %(now)s
WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running' AND lock_owner = %(worker)s
RETURNING id;

-- name: save_checkpoint
UPDATE portalq.job_queue SET checkpoint = checkpoint || %(data)s::jsonb, heartbeat_at = %(now)s,
                     updated_at = %(now)s
WHERE id = %(id)s AND status = 'running' AND lock_owner = %(worker)s
RETURNING checkpoint;

-- name: release
-- Graceful shutdown: unfinished jobs go back to the queue, the attempt refunded.
WITH upd AS (
    UPDATE portalq.job_queue SET status = 'pending', attempts = attempts - 1, lock_owner = NULL,
                         heartbeat_at = NULL, updated_at = %(now)s
    WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running' AND lock_owner = %(worker)s
    RETURNING id, attempts
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, worker, detail)
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
SELECT id, job_type, lock_owner, heartbeat_at FROM portalq.job_queue
WHERE status = 'running' AND heartbeat_at < %(stale_before)s
  AND pg_postmaster_start_time() < %(stale_before)s
ORDER BY heartbeat_at
LIMIT %(limit)s;

-- name: lock_stale
SELECT id, job_type, attempts, max_attempts, checkpoint, crashes FROM portalq.job_queue
WHERE id = %(id)s AND status = 'running' AND heartbeat_at = %(heartbeat_at)s
FOR UPDATE SKIP LOCKED;

-- name: rescue
-- A crash is not the job's fault: the attempt is refunded and the crash counted. A job
-- back in the queue goes behind the jobs already due (run_at: now + 2^crashes s), so the
-- same oldest jobs are not the ones in flight at every restart of a crash-looping node.
WITH upd AS (
    UPDATE portalq.job_queue SET status = %(status)s, lock_owner = NULL, heartbeat_at = NULL,
        run_at = CASE WHEN %(status)s = 'pending'
                      THEN %(now)s + make_interval(secs => power(2, least(crashes + 1, 10)))
                      ELSE run_at END,
        attempts = greatest(attempts - 1, 0), crashes = crashes + 1,
        checkpoint = checkpoint - %(cp_drop)s::text[],   -- a stale lookup answer (issue 35)
        last_error = %(error)s, updated_at = %(now)s,
        finished_at = CASE WHEN %(status)s = 'failed' THEN %(now)s END
    WHERE id = %(id)s AND status = 'running'
    RETURNING id, attempts, crashes
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, error, worker, detail)
    SELECT id, %(now)s, attempts + 1, 'running', %(status)s, %(error)s, %(worker)s,
           jsonb_build_object('event', 'rescued', 'crash', crashes) FROM upd
)
SELECT id, attempts, crashes FROM upd;

-- name: rescue_skipped
-- A stale job the rescuer could not handle: said on the job; the others proceed.
UPDATE portalq.job_queue SET last_error = %(error)s, updated_at = %(now)s
WHERE id = %(id)s AND status = 'running';

-- name: defer_candidates
-- One batch of a closed portal's due jobs, to be deferred to its next opening by defer_ids
-- (at most %(limit)s: a bulk deferral is a loop of bounded batches, never one statement
-- over a million rows; ids in %(skip)s are rows a batch could not defer, left out).
-- A skip scan of the claim index: one probe per distinct priority of the portal's waiting
-- jobs, then per priority an index range on run_at, so jobs already deferred to a later
-- opening (however many) are never visited.
WITH RECURSIVE prio AS (
    (SELECT q.priority FROM portalq.job_queue q
     WHERE q.portal = %(portal)s AND q.status IN ('pending', 'deferred')
     ORDER BY q.priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT q.priority FROM portalq.job_queue q
            WHERE q.portal = %(portal)s AND q.status IN ('pending', 'deferred')
              AND q.priority < prio.priority
            ORDER BY q.priority DESC LIMIT 1)
    FROM prio WHERE prio.priority IS NOT NULL
)
SELECT j.id FROM prio CROSS JOIN LATERAL (
    SELECT q.id FROM portalq.job_queue q
    WHERE q.portal = %(portal)s AND q.priority = prio.priority
      AND q.status IN ('pending', 'deferred')
      AND q.run_at < %(next_open)s AND q.run_at <= %(now)s
      AND q.id <> ALL(%(skip)s::bigint[])
    LIMIT %(limit)s   -- also keeps the lateral a per-priority index range, never a join
) j
WHERE prio.priority IS NOT NULL
LIMIT %(limit)s;

-- name: defer_ids
-- Defer these jobs (from defer_candidates) to the portal's next opening, no attempt
-- spent; a job claimed or deferred since it was read is left as it is.
WITH upd AS (
    UPDATE portalq.job_queue q SET status = 'deferred', run_at = %(next_open)s, updated_at = %(now)s
    WHERE q.id = ANY(%(ids)s::bigint[]) AND q.status IN ('pending', 'deferred')
      AND q.run_at < %(next_open)s AND q.run_at <= %(now)s
    RETURNING q.id, q.attempts
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, detail)
    SELECT id, %(now)s, attempts, 'pending', 'deferred', %(detail)s::jsonb FROM upd
)
SELECT count(*)::int AS deferred FROM upd;

-- name: cancel
WITH upd AS (
    UPDATE portalq.job_queue SET status = 'cancelled', finished_at = %(now)s, updated_at = %(now)s,
        secret_key_id = NULL, secret_dek = NULL, secret_data = NULL,
        secrets_erased_at = CASE WHEN secret_data IS NULL THEN secrets_erased_at
                                 ELSE %(now)s END
    WHERE id = %(id)s AND status IN ('pending', 'deferred', 'failed')
    RETURNING id, attempts, %(from)s::text AS from_status
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, from_status, 'cancelled', %(actor)s,
           '{"event": "admin cancel"}'::jsonb FROM upd
)
SELECT id FROM upd;

-- name: admin_retry
-- A failed (or cancelled) job back to the queue with a fresh attempt budget; checkpoints kept.
WITH upd AS (
    UPDATE portalq.job_queue SET status = 'pending', run_at = %(now)s, updated_at = %(now)s,
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
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, from_status, 'pending', %(actor)s, %(detail)s::jsonb FROM upd
)
SELECT id FROM upd;

-- name: admin_complete
-- An admin confirms a failed (uncertain) job did reach the portal: completed with that output.
WITH upd AS (
    UPDATE portalq.job_queue SET status = 'completed', result = %(result)s::jsonb,
        finished_at = %(now)s, updated_at = %(now)s,
        secret_key_id = NULL, secret_dek = NULL, secret_data = NULL,
        secrets_erased_at = CASE WHEN secret_data IS NULL THEN secrets_erased_at
                                 ELSE %(now)s END
    WHERE id = %(id)s AND status = 'failed'
    RETURNING id, attempts
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, 'failed', 'completed', %(actor)s, %(detail)s::jsonb FROM upd
)
SELECT id FROM upd;

-- name: notify
SELECT pg_notify('portalq_jobs', %(reason)s);

-- name: get_job
SELECT * FROM portalq.job_queue WHERE id = %(id)s;

-- name: get_job_for_update
SELECT * FROM portalq.job_queue WHERE id = %(id)s FOR UPDATE;

-- name: job_events
-- The job's history: its creation (derived from the job row, which is its own creation
-- record: no event row is written on enqueue), then one row per transition.
SELECT at, attempt, from_status, to_status, error, worker, detail FROM (
    SELECT 0 AS seq, created_at AS at, 0::smallint AS attempt, NULL::text AS from_status,
           'pending'::text AS to_status, NULL::text AS error, NULL::text AS worker,
           '{"event": "enqueued"}'::jsonb AS detail
    FROM portalq.job_queue WHERE id = %(id)s
    UNION ALL
    SELECT id, at, attempt, from_status, to_status, error, worker, detail FROM portalq.job_events
    WHERE job_id = %(id)s
) h ORDER BY seq;

-- name: order_jobs
-- Every job of one of the business's orders (`portalq orders show`), oldest first.
SELECT * FROM portalq.job_queue WHERE order_id = %(order_id)s ORDER BY id;

-- name: job_artifacts
SELECT attempt, kind, path, note, created_at FROM portalq.job_artifacts WHERE job_id = %(id)s ORDER BY id;

-- name: add_artifact
INSERT INTO portalq.job_artifacts (job_id, attempt, kind, path, note, created_at)
VALUES (%(job_id)s, %(attempt)s, %(kind)s, %(path)s, %(note)s, %(now)s);

-- name: live_frame_put
-- The newest live-view frame of a running job (it replaces the one before), and a word to
-- the consoles on portalq_live: "job id:seq" (they read the frame only if someone watches).
WITH put AS (
  INSERT INTO portalq.live_frames AS f (job_id, seq, taken_at, published_at, width, height,
                                        url, jpeg)
  VALUES (%(job_id)s, 1, %(taken_at)s, %(now)s, %(width)s, %(height)s, %(url)s, %(jpeg)s)
  ON CONFLICT (job_id) DO UPDATE SET seq = f.seq + 1, taken_at = EXCLUDED.taken_at,
    published_at = EXCLUDED.published_at, width = EXCLUDED.width,
    height = EXCLUDED.height, url = EXCLUDED.url, jpeg = EXCLUDED.jpeg
  RETURNING job_id, seq)
SELECT pg_notify('portalq_live', job_id || ':' || seq) FROM put;

-- name: live_frame_get
SELECT job_id, seq, taken_at, published_at, width, height, url, jpeg, holder
FROM portalq.live_frames WHERE job_id = %(job_id)s;

-- name: live_frame_drop
-- The job's browser is closed: no live view any more (the consoles hear "job id:0").
WITH gone AS (DELETE FROM portalq.live_frames WHERE job_id = %(job_id)s RETURNING job_id)
SELECT pg_notify('portalq_live', job_id || ':0') FROM gone;

-- name: live_watch
-- A console page watches the job's page: its worker casts it (for a while; renewed).
SELECT pg_notify('portalq_live_input',
                 json_build_object('job', %(job_id)s::bigint, 'kind', 'watch')::text);

-- name: live_take
-- A console user takes the job's page over: only while it is live, and only if nobody
-- else holds it (a second operator is refused). Returns the holder's row, or nothing.
UPDATE portalq.live_frames SET holder = %(user)s, held_at = %(now)s
WHERE job_id = %(job_id)s AND (holder IS NULL OR holder = %(user)s)
RETURNING job_id, holder, held_at;

-- name: live_release
-- The holder hands the page back; a flow holding its browser for a person hears it.
WITH handed AS (
  UPDATE portalq.live_frames SET holder = NULL, held_at = NULL
  WHERE job_id = %(job_id)s AND holder = %(user)s
  RETURNING job_id)
SELECT job_id, pg_notify('portalq_live_input',
                         json_build_object('job', job_id, 'kind', 'handback',
                                           'by', %(user)s::text)::text)
FROM handed;

-- name: live_audit
-- What the service did with a job's browser (held for a person, the hold's end).
INSERT INTO portalq.audit_log (at, actor, role, source, action, target, reason)
VALUES (%(now)s, 'portalq', NULL, 'service', %(action)s, 'job:' || %(job_id)s,
        %(reason)s);

-- name: live_holder
SELECT holder, held_at FROM portalq.live_frames WHERE job_id = %(job_id)s;

-- name: live_input
-- One input event of the page's holder, to the worker driving the page; nothing for
-- anyone else (checked in the same statement: a hold released meanwhile sends nothing;
-- the row locked first, so an input racing a hand-back waits for it and is then refused;
-- the notification is made from the locked rows only, never from a row the lock rejected).
WITH held AS (
  SELECT job_id FROM portalq.live_frames
  WHERE job_id = %(job_id)s AND holder = %(user)s
  FOR UPDATE)
SELECT pg_notify('portalq_live_input', %(event)s) FROM held;

-- name: list_jobs
SELECT id, job_type, order_id, portal, status, priority, run_at, attempts, max_attempts,
       last_error, created_at, updated_at
FROM portalq.job_queue
WHERE (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(portal)s::text IS NULL OR portal = %(portal)s)
  AND (%(order_id)s::text IS NULL OR order_id = %(order_id)s)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: list_jobs_waiting
-- The jobs waiting on a portal's decision (jobs.waiting's checkpoint marker ``waiting``:
-- deferred, submitted, the registry has not decided), those expected soonest (or overdue)
-- first; read through the partial index of the unfinished states.
SELECT id, job_type, order_id, portal, status, run_at, checkpoint -> 'waiting' AS waiting
FROM portalq.job_queue
WHERE status = 'deferred' AND checkpoint ? 'waiting'
  AND (%(portal)s::text IS NULL OR portal = %(portal)s)
  AND (%(order_id)s::text IS NULL OR order_id = %(order_id)s)
ORDER BY checkpoint #>> '{waiting,expected_by}', id
LIMIT %(limit)s;

-- name: count_by_portal_status
SELECT portal, status, count(*)::int AS n FROM portalq.job_queue GROUP BY portal, status
ORDER BY portal, status;

-- name: status_running
SELECT id, job_type, order_id, portal, attempts, started_at,
       checkpoint->>'step' AS step
FROM portalq.job_queue WHERE status = 'running' ORDER BY started_at LIMIT 20;

-- name: status_deferred
SELECT id, job_type, order_id, portal, run_at, checkpoint->'waiting' AS waiting FROM portalq.job_queue
WHERE status = 'deferred' ORDER BY run_at, id LIMIT 10;

-- name: status_failures
SELECT j.id, j.job_type, j.order_id, j.attempts, j.last_error, j.finished_at,
       bool_or(e.sent_at IS NOT NULL) AS mailed
FROM portalq.job_queue j LEFT JOIN portalq.escalations e ON e.job_id = j.id
WHERE j.status = 'failed'
GROUP BY j.id ORDER BY j.finished_at DESC NULLS LAST LIMIT 10;

-- name: unsent_mail
-- Escalations and portal notices not mailed yet (the demo exits only when none is left).
SELECT (SELECT count(*) FROM portalq.escalations WHERE sent_at IS NULL)
     + (SELECT count(*) FROM portalq.portal_notices WHERE sent_at IS NULL) AS n;

-- name: store_document
INSERT INTO portalq.job_documents (job_id, name, content_type, data, key_id, created_at)
VALUES (%(job_id)s, %(name)s, %(content_type)s, %(data)s, %(key_id)s, %(now)s)
ON CONFLICT ON CONSTRAINT job_documents_name
DO UPDATE SET content_type = EXCLUDED.content_type, data = EXCLUDED.data,
              key_id = EXCLUDED.key_id;

-- name: documents_of
SELECT name, content_type, data, key_id FROM portalq.job_documents WHERE job_id = %(job_id)s ORDER BY id;

-- name: document_names
SELECT name, content_type, length(data) AS size FROM portalq.job_documents
WHERE job_id = %(job_id)s ORDER BY id;

-- name: due_escalations
SELECT e.id, e.job_id, e.attempt, e.kind, e.reason, e.send_attempts, e.created_at,
       e.mail_token, j.job_type, j.order_id, j.portal, j.attempts, j.max_attempts, j.last_error,
       j.checkpoint, j.status
FROM portalq.escalations e JOIN portalq.job_queue j ON j.id = e.job_id
WHERE e.sent_at IS NULL AND e.next_try_at <= %(now)s AND e.id <> ALL(%(skip)s::bigint[])
ORDER BY e.id
LIMIT %(limit)s
FOR UPDATE OF e SKIP LOCKED;

-- name: due_escalations_like
-- The other unsent escalations of one portal and kind, locked: those of one incident go
-- out as one mail (scheduler/mailer.send_due_escalations), marked sent in its transaction.
-- Due, or never tried yet (held only to gather an incident: mailer's gather window).
SELECT e.id, e.job_id, e.attempt, e.kind, e.reason, e.send_attempts, e.created_at,
       e.mail_token, j.job_type, j.order_id, j.portal, j.attempts, j.max_attempts, j.last_error,
       j.checkpoint, j.status
FROM portalq.escalations e JOIN portalq.job_queue j ON j.id = e.job_id
WHERE e.sent_at IS NULL AND (e.next_try_at <= %(now)s OR e.send_attempts = 0)
  AND e.id <> ALL(%(skip)s::bigint[])
  AND e.kind = %(kind)s AND j.portal = %(portal)s
ORDER BY e.id
LIMIT %(limit)s
FOR UPDATE OF e SKIP LOCKED;

-- name: escalation_hold
-- Not yet: wait for the rest of its incident (no send attempt counted).
UPDATE portalq.escalations SET next_try_at = %(until)s WHERE id = %(id)s AND sent_at IS NULL;

-- name: job_first_escalation
SELECT id, mail_token FROM portalq.escalations WHERE job_id = %(job_id)s ORDER BY id LIMIT 1;

-- name: escalation_threads
-- The threads a cause may still be mailed in: the sent escalations of a portal's kind since
-- %(since)s, newest first, each with its thread's first escalation (its Message-ID's token,
-- and the mail it sent: a reply takes its subject). The caller compares the causes.
SELECT e.id, e.reason, e.created_at, e.mail_thread, t.mail_token AS thread_token,
       t.message AS thread_message
FROM portalq.escalations e JOIN portalq.job_queue j ON j.id = e.job_id
JOIN portalq.escalations t ON t.id = e.mail_thread
WHERE e.mail_thread IS NOT NULL AND e.kind = %(kind)s AND e.created_at >= %(since)s
  AND e.sent_at IS NOT NULL AND j.portal = %(portal)s
ORDER BY e.created_at DESC, e.id DESC
LIMIT 200;

-- name: escalation_in_thread
-- The escalations of one mail, in the thread it starts or replies in (with it, sent).
UPDATE portalq.escalations SET mail_thread = %(thread)s WHERE id = ANY(%(ids)s::bigint[]);

-- name: escalation_sent
UPDATE portalq.escalations SET sent_at = %(now)s, send_attempts = send_attempts + 1
WHERE id = %(id)s;

-- name: escalation_send_failed
UPDATE portalq.escalations SET send_attempts = send_attempts + 1, last_send_error = %(error)s,
                       next_try_at = %(next_try_at)s
WHERE id = %(id)s;

-- name: erase_failed_secrets
-- Crypto-shredding of failed jobs' sealed secrets once they have waited %(before)s for an
-- admin retry (completed and cancelled jobs lose theirs at once: complete_many, cancel).
WITH upd AS (
    UPDATE portalq.job_queue SET secret_key_id = NULL, secret_dek = NULL, secret_data = NULL,
                         secrets_erased_at = %(now)s
    WHERE id IN (SELECT id FROM portalq.job_queue
                 WHERE status = 'failed' AND finished_at < %(before)s
                   AND secret_data IS NOT NULL
                 LIMIT %(limit)s)
    RETURNING id
)
SELECT count(*)::int AS erased FROM upd;

-- name: sealed_rows
-- Rotation: the next sealed jobs (by id) whose data key is wrapped by another KEK.
SELECT id, secret_key_id, secret_dek FROM portalq.job_queue
WHERE id > %(after)s AND secret_key_id IS NOT NULL AND secret_key_id <> %(current)s
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: rewrap_rows
-- Rotation: new wrappings of the same data keys (only rows still wrapped by the old KEK).
UPDATE portalq.job_queue q SET secret_key_id = n.key_id, secret_dek = n.dek
FROM unnest(%(ids)s::bigint[], %(old)s::text[], %(key_ids)s::text[], %(deks)s::bytea[])
     AS n(id, old, key_id, dek)
WHERE q.id = n.id AND q.secret_key_id = n.old;

-- name: sealed_documents
SELECT id, key_id, data FROM portalq.job_documents
WHERE id > %(after)s AND key_id IS NOT NULL AND key_id <> %(current)s
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: rewrap_documents
UPDATE portalq.job_documents d SET key_id = n.key_id, data = n.data
FROM unnest(%(ids)s::bigint[], %(old)s::text[], %(key_ids)s::text[], %(datas)s::bytea[])
     AS n(id, old, key_id, data)
WHERE d.id = n.id AND d.key_id = n.old;

-- name: legacy_secret_rows
-- Jobs of types with secret fields enqueued before they were sealed (migration 0012).
SELECT id, job_type, payload FROM portalq.job_queue
WHERE job_type = ANY(%(types)s::text[]) AND id > %(after)s AND secret_key_id IS NULL
  AND secrets_erased_at IS NULL AND status IN ('pending', 'deferred', 'failed')
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: seal_legacy_row
UPDATE portalq.job_queue SET payload = %(payload)s::jsonb, secret_key_id = %(key_id)s,
                     secret_dek = %(dek)s, secret_data = %(data)s
WHERE id = %(id)s AND secret_key_id IS NULL;

-- name: unbound_sealed_rows
-- Rotation: sealed job secrets of format 1 or 2 (not bound to their job, or sharing a data
-- key with the other jobs of a burst: no 'PQS3' magic, jobs/secrets/crypto.py), to be sealed again
-- bound to their job with a data key of their own.
SELECT id, job_type, secret_key_id, secret_dek, secret_data FROM portalq.job_queue
WHERE id > %(after)s AND secret_data IS NOT NULL
  AND substring(secret_data FROM 1 FOR 4) <> '\x50515333'::bytea
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: bind_sealed_row
UPDATE portalq.job_queue SET secret_key_id = %(key_id)s, secret_dek = %(dek)s, secret_data = %(data)s
WHERE id = %(id)s AND secret_data = %(old)s;

-- name: sealed_webhook_secrets
SELECT id, key_id, secret AS data FROM portalq.webhook_subscriptions
WHERE id > %(after)s AND key_id <> %(current)s
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: rewrap_webhook_secrets
UPDATE portalq.webhook_subscriptions w SET key_id = n.key_id, secret = n.data
FROM unnest(%(ids)s::bigint[], %(old)s::text[], %(key_ids)s::text[], %(datas)s::bytea[])
     AS n(id, old, key_id, data)
WHERE w.id = n.id AND w.key_id = n.old;

-- name: sealed_checkpoints
-- Rotation: jobs whose checkpoint holds a value sealed under another KEK
-- ("pqsealed1:<key id>:...", jobs/secrets/sealing.py).
SELECT id, job_type, checkpoint FROM portalq.job_queue q
WHERE id > %(after)s AND EXISTS (
    SELECT 1 FROM jsonb_each_text(q.checkpoint) e
    WHERE starts_with(e.value, 'pqsealed1:') AND split_part(e.value, ':', 2) <> %(current)s)
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: rewrap_checkpoint
UPDATE portalq.job_queue SET checkpoint = checkpoint || %(patch)s::jsonb WHERE id = %(id)s;

-- name: database_identity
-- Which database this is, for the record of the databases using a key file
-- (jobs/secrets/key_registry.py): the cluster's system identifier where this role may read it, the
-- database's name, and the names of the cluster's databases (a recorded one missing was
-- dropped). Read-only: it may run inside a caller's transaction.
SELECT CASE WHEN has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE')
            THEN (SELECT system_identifier::text FROM pg_catalog.pg_control_system())
       END AS sysid,
       current_database()::text AS name,
       ARRAY(SELECT datname::text FROM pg_catalog.pg_database) AS databases;

-- name: key_usage
-- How many stored values each KEK wraps (portalq keys status / retire).
SELECT key_id, sum(n)::int AS n FROM (
    SELECT secret_key_id AS key_id, count(*) AS n FROM portalq.job_queue
    WHERE secret_key_id IS NOT NULL GROUP BY secret_key_id
    UNION ALL
    SELECT key_id, count(*) FROM portalq.job_documents WHERE key_id IS NOT NULL GROUP BY key_id
    UNION ALL
    SELECT key_id, count(*) FROM portalq.webhook_subscriptions GROUP BY key_id
    UNION ALL
    -- an order's input, sealed while a step waits for it (issue 41)
    SELECT input_key_id, count(*) FROM portalq.orders WHERE input_key_id IS NOT NULL
    GROUP BY input_key_id
    UNION ALL
    SELECT split_part(e.value, ':', 2), count(*)
    FROM portalq.job_queue q CROSS JOIN LATERAL jsonb_each_text(q.checkpoint) e
    WHERE starts_with(e.value, 'pqsealed1:') GROUP BY 1
) u GROUP BY key_id ORDER BY key_id;

-- name: prune_finished
-- Completed/cancelled jobs finished before %(before)s, failed ones before
-- %(failed_before)s, with their events (job_events has no
-- foreign key); artifacts, documents and escalations go by ON DELETE CASCADE.
WITH gone AS (
    DELETE FROM portalq.job_queue WHERE id IN (
        (SELECT id FROM portalq.job_queue
         WHERE status IN ('completed', 'cancelled') AND finished_at < %(before)s
         LIMIT %(limit)s)
        UNION ALL
        (SELECT id FROM portalq.job_queue
         WHERE status = 'failed' AND finished_at < %(failed_before)s
         LIMIT %(limit)s))
    RETURNING id
), events AS (
    DELETE FROM portalq.job_events WHERE job_id IN (SELECT id FROM gone)
)
SELECT count(*)::int AS pruned FROM gone;

-- name: prune_candidates
-- What prune_finished deletes, one by one (after a batch that could not be deleted).
(SELECT id FROM portalq.job_queue
 WHERE status IN ('completed', 'cancelled') AND finished_at < %(before)s
 LIMIT %(limit)s)
UNION ALL
(SELECT id FROM portalq.job_queue
 WHERE status = 'failed' AND finished_at < %(failed_before)s
 LIMIT %(limit)s);

-- name: prune_one
WITH gone AS (
    DELETE FROM portalq.job_queue WHERE id = %(id)s RETURNING id
), events AS (
    DELETE FROM portalq.job_events WHERE job_id IN (SELECT id FROM gone)
)
SELECT count(*)::int AS pruned FROM gone;

-- name: list_portals
SELECT code, name, timezone, holiday_country, holiday_subdiv, max_concurrent_sessions,
       cutoff_minutes, enabled, paused_at, pause_reason, paused_by, probe_at, outage_streak,
       url, drift_pauses
FROM portalq.portals ORDER BY code;

-- name: portal_holidays
-- Per portal, the years whose holidays portal_holidays holds (first..last) and those days,
-- in one statement (one snapshot: a refresh in between cannot pair new years with old
-- days). Only portals whose stored holidays are for their current region.
SELECT p.code AS portal, p.holidays_from AS first, p.holidays_to AS last,
       coalesce(array_agg(h.day ORDER BY h.day) FILTER (WHERE h.day IS NOT NULL),
                '{}') AS days
FROM portalq.portals p LEFT JOIN portalq.portal_holidays h ON h.portal = p.code
WHERE p.holidays_region = p.holiday_country || '/' || coalesce(p.holiday_subdiv, '')
  AND p.holidays_from IS NOT NULL AND p.holidays_to IS NOT NULL
GROUP BY p.code, p.holidays_from, p.holidays_to
ORDER BY p.code;

-- name: holidays_due
-- Portals with a holiday region whose stored holidays are for another region, or end
-- before %(through)s (a year).
SELECT code, holiday_country, holiday_subdiv FROM portalq.portals
WHERE holiday_country IS NOT NULL
  AND (holidays_region IS DISTINCT FROM holiday_country || '/' || coalesce(holiday_subdiv, '')
       OR holidays_to IS NULL OR holidays_to < %(through)s)
ORDER BY code;

-- name: store_holidays
-- Replace one portal's stored holidays with these (years %(first)s..%(last)s of %(region)s).
WITH new AS (
    SELECT * FROM unnest(%(days)s::date[], %(names)s::text[]) AS n(day, name)
), gone AS (
    DELETE FROM portalq.portal_holidays h
    WHERE h.portal = %(portal)s AND h.day NOT IN (SELECT day FROM new)
), put AS (
    INSERT INTO portalq.portal_holidays (portal, day, name) SELECT %(portal)s, day, name FROM new
    ON CONFLICT (portal, day) DO UPDATE SET name = excluded.name
)
UPDATE portalq.portals SET holidays_region = %(region)s, holidays_from = %(first)s::smallint,
                   holidays_to = %(last)s::smallint
WHERE code = %(portal)s;

-- name: portal_hours
SELECT portal, weekday, opens, closes FROM portalq.portal_hours ORDER BY portal, weekday, opens;

-- name: portal_closures
SELECT portal, starts_at, ends_at, reason FROM portalq.portal_closures
WHERE ends_at > %(after)s ORDER BY portal, starts_at;

-- name: delete_portal_hours
DELETE FROM portalq.portal_hours WHERE portal = %(portal)s AND (%(weekday)s::int IS NULL OR weekday = %(weekday)s);

-- name: insert_portal_hours
INSERT INTO portalq.portal_hours (portal, weekday, opens, closes)
SELECT %(portal)s, w, o, c FROM unnest(%(weekdays)s::int[], %(opens)s::time[], %(closes)s::time[])
AS h(w, o, c);

-- name: insert_closure
INSERT INTO portalq.portal_closures (portal, starts_at, ends_at, reason, created_at)
VALUES (%(portal)s, %(starts_at)s, %(ends_at)s, %(reason)s, %(now)s) RETURNING id;

-- name: touch_portal
UPDATE portalq.portals SET updated_at = %(now)s WHERE code = %(portal)s;

-- name: outage_lock
-- Before outage_seen, in its transaction: signs of one portal are counted one after the
-- other. outage_seen counts in its statement's snapshot, so two signs recorded at the same
-- moment did not see each other (3 simultaneous failures paused 2 of 5 portals); behind
-- this lock (held to the commit) the next outage_seen's snapshot has the earlier sign.
SELECT 1 FROM portalq.portals WHERE code = %(portal)s FOR UPDATE;

-- name: outage_seen
-- One more outage sign from job %(job_id)s; the streak is the number of distinct jobs
-- that showed one since %(since)s (this one included: the same job failing again, or two
-- jobs alternately, never lengthen it past the jobs involved). Also returned: the job of
-- the portal's previous sign (prev_job) and when this job's run started (a run started
-- before the pause was no probe).
WITH prev AS (
    SELECT outage_last_job AS prev_job FROM portalq.portals WHERE code = %(portal)s
), sign AS (
    INSERT INTO portalq.portal_outage_signs (portal, job_id, seen_at)
    VALUES (%(portal)s, %(job_id)s, %(now)s)
    ON CONFLICT (portal, job_id) DO UPDATE SET seen_at = excluded.seen_at
), old AS (
    DELETE FROM portalq.portal_outage_signs WHERE portal = %(portal)s AND seen_at < %(since)s
), recent AS (
    SELECT count(*)::int + 1 AS n FROM portalq.portal_outage_signs
    WHERE portal = %(portal)s AND seen_at >= %(since)s AND job_id <> %(job_id)s
)
UPDATE portalq.portals SET outage_streak = (SELECT n FROM recent), outage_last_job = %(job_id)s,
                   updated_at = %(now)s
WHERE code = %(portal)s
RETURNING outage_streak, paused_at, paused_by, (SELECT prev_job FROM prev) AS prev_job,
          (SELECT started_at FROM portalq.job_queue WHERE id = %(job_id)s) AS started_at;

-- name: pause_portal
-- Pause a portal (by the breaker or an operator; only a running portal is paused) + notice.
WITH p AS (
    UPDATE portalq.portals SET paused_at = %(now)s, paused_by = %(by)s, pause_reason = %(reason)s,
                       probe_at = %(probe_at)s, updated_at = %(now)s
    WHERE code = %(portal)s AND paused_at IS NULL
    RETURNING code
)
INSERT INTO portalq.portal_notices (portal, kind, reason, created_at, next_try_at)
SELECT code, 'paused', %(reason)s, %(now)s, %(now)s FROM p
RETURNING id;

-- name: drift_pause
-- A flow met a page it does not know: its job type on that portal is held until an operator
-- resumes the portal (no probe, no resume by a success); the portal's other job types go
-- on (a changed page of one flow says nothing of the others'). Returns held = 1 when this
-- call held it (0: held already, or the portal is paused by an operator). No notice: the
-- job's one portal_changed escalation tells the admins (with the page's evidence).
WITH p AS (
    UPDATE portalq.portals
    SET drift_pauses = drift_pauses || jsonb_build_object(
            %(job_type)s::text, jsonb_build_object('at', %(now)s::timestamptz,
                                                  'reason', %(reason)s::text)),
        updated_at = %(now)s
    WHERE code = %(portal)s AND NOT drift_pauses ? %(job_type)s::text
      AND (paused_at IS NULL OR paused_by = 'breaker')
    RETURNING code
), told AS (
    SELECT pg_notify('portalq_portals', code) FROM p
)
SELECT count(*)::int AS paused, (SELECT count(*) FROM told)::int AS told FROM p;

-- name: probe_failed
UPDATE portalq.portals SET probe_at = %(probe_at)s, updated_at = %(now)s
WHERE code = %(portal)s AND paused_by = 'breaker';

-- name: idle_probes_due
-- Portals the breaker paused whose probe is due and that no job will probe now: none of
-- their jobs is running or due (a job deferred past the probe is not). The leader checks
-- their landing page instead, so a portal whose jobs were all cancelled does not stay
-- paused with nothing left to probe it (issue 48).
SELECT p.code FROM portalq.portals p
WHERE p.paused_by = 'breaker' AND p.probe_at <= %(now)s
  AND NOT EXISTS (SELECT 1 FROM portalq.job_queue q
                  WHERE q.portal = p.code AND q.status IN ('pending', 'deferred')
                    AND q.run_at <= %(now)s)
  AND NOT EXISTS (SELECT 1 FROM portalq.job_queue q
                  WHERE q.portal = p.code AND q.status = 'running');

-- name: landing_resume
-- A breaker-paused portal whose landing page answered (no job was there to probe it):
-- resumed as a probe job's success resumes it -- its streak and signs cleared, one
-- 'resumed' notice. An operator's or a drift pause is never touched.
WITH p AS (
    UPDATE portalq.portals SET paused_at = NULL, paused_by = NULL, pause_reason = NULL,
                       probe_at = NULL, outage_streak = 0, outage_last_job = NULL,
                       updated_at = %(now)s
    WHERE code = %(portal)s AND paused_by = 'breaker'
    RETURNING code
), signs AS (
    DELETE FROM portalq.portal_outage_signs s USING p WHERE s.portal = p.code
), resumed AS (
    INSERT INTO portalq.portal_notices (portal, kind, reason, created_at, next_try_at)
    SELECT code, 'resumed', 'its landing page answered (no job was waiting to probe it)',
           %(now)s, %(now)s
    FROM p
    RETURNING portal
), told AS (
    SELECT pg_notify('portalq_portals', portal) FROM resumed
)
SELECT count(*)::int AS resumed, (SELECT count(*) FROM told)::int AS told FROM p;

-- name: operator_resume
-- (the job types held for a changed page are released with it)
WITH p AS (
    UPDATE portalq.portals SET paused_at = NULL, paused_by = NULL, pause_reason = NULL,
                       probe_at = NULL, outage_streak = 0, outage_last_job = NULL,
                       drift_pauses = '{}', updated_at = %(now)s
    WHERE code = %(portal)s AND (paused_at IS NOT NULL OR drift_pauses <> '{}')
    RETURNING code
), signs AS (
    DELETE FROM portalq.portal_outage_signs s USING p WHERE s.portal = p.code
)
SELECT count(*)::int AS resumed FROM p;

-- name: notify_portals
SELECT pg_notify('portalq_portals', %(portal)s);

-- name: due_notices
SELECT id, portal, kind, reason, send_attempts, mail_token FROM portalq.portal_notices
WHERE sent_at IS NULL AND next_try_at <= %(now)s AND id <> ALL(%(skip)s::bigint[])
ORDER BY id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: outbox_next_try
-- When the next unsent escalation or notice is due (NULL: none waits).
SELECT least((SELECT min(next_try_at) FROM portalq.escalations WHERE sent_at IS NULL),
             (SELECT min(next_try_at) FROM portalq.portal_notices WHERE sent_at IS NULL)) AS at;

-- name: notice_sent
UPDATE portalq.portal_notices SET sent_at = %(now)s, send_attempts = send_attempts + 1
WHERE id = %(id)s;

-- name: notice_send_failed
UPDATE portalq.portal_notices SET send_attempts = send_attempts + 1, last_send_error = %(error)s,
                          next_try_at = %(next_try_at)s
WHERE id = %(id)s;

-- name: try_leader_lock
SELECT pg_try_advisory_lock(%(lock)s::bigint) AS leader;

-- name: migrate_lock
SELECT pg_advisory_xact_lock(%(lock)s::bigint);

-- name: portals_without_holidays_or_cutoff
-- The demo: stand-ins open whenever the demo runs.
UPDATE portalq.portals SET holiday_country = NULL, holiday_subdiv = NULL, cutoff_minutes = 0;

-- name: ping
SELECT 1;

-- =========================================================================================
-- The admin console (scheduler/console), run from jobs/admin/reads.py and jobs/audit.py.
-- =========================================================================================

-- name: console_user_add
INSERT INTO portalq.console_users (name, role, password_hash, created_at, password_changed_at)
VALUES (%(name)s, %(role)s, %(password_hash)s, %(now)s, %(now)s)
ON CONFLICT (name) DO NOTHING
RETURNING id, name, role;

-- name: console_user_by_name
SELECT id, name, role, password_hash, created_at, password_changed_at, disabled_at
FROM portalq.console_users WHERE name = %(name)s;

-- name: console_user_set_password
UPDATE portalq.console_users SET password_hash = %(password_hash)s,
                         password_changed_at = %(now)s
WHERE name = %(name)s RETURNING id;

-- name: console_user_rehash
UPDATE portalq.console_users SET password_hash = %(password_hash)s WHERE id = %(id)s;

-- name: console_user_disable
-- Disabling a user also ends every session of theirs.
WITH u AS (
    UPDATE portalq.console_users SET disabled_at = %(now)s
    WHERE name = %(name)s AND disabled_at IS NULL RETURNING id
), s AS (
    UPDATE portalq.console_sessions SET ended_at = %(now)s
    WHERE user_id IN (SELECT id FROM u) AND ended_at IS NULL
)
SELECT id FROM u;

-- name: console_users
SELECT id, name, role, created_at, password_changed_at, disabled_at,
       (SELECT max(last_seen_at) FROM portalq.console_sessions s WHERE s.user_id = u.id) AS last_seen_at,
       EXISTS (SELECT 1 FROM portalq.console_sso_identities i WHERE i.user_id = u.id) AS sso
FROM portalq.console_users u ORDER BY name;

-- name: console_session_start
INSERT INTO portalq.console_sessions (token_hash, user_id, created_at, last_seen_at)
VALUES (%(token_hash)s, %(user_id)s, %(now)s, %(now)s) RETURNING id;

-- name: console_session_touch
-- The session behind a cookie, if it is live (not ended, not idle past %(idle_before)s, its
-- user enabled); last_seen_at moves on (at most every few seconds: %(touch_before)s).
WITH s AS (
    SELECT s.id, s.user_id, s.last_seen_at FROM portalq.console_sessions s
    JOIN portalq.console_users u ON u.id = s.user_id
    WHERE s.token_hash = %(token_hash)s AND s.ended_at IS NULL
      AND s.last_seen_at >= %(idle_before)s AND u.disabled_at IS NULL
), t AS (
    UPDATE portalq.console_sessions c SET last_seen_at = %(now)s FROM s
    WHERE c.id = s.id AND s.last_seen_at < %(touch_before)s
)
SELECT s.id AS session_id, u.id AS user_id, u.name, u.role
FROM s JOIN portalq.console_users u ON u.id = s.user_id;

-- name: console_session_live
-- Is the session still live? (for a long-open live stream: it must not keep the session
-- alive, so it does not touch last_seen_at)
SELECT s.id FROM portalq.console_sessions s JOIN portalq.console_users u ON u.id = s.user_id
WHERE s.token_hash = %(token_hash)s AND s.ended_at IS NULL
  AND s.last_seen_at >= %(idle_before)s AND u.disabled_at IS NULL;

-- name: console_session_end
UPDATE portalq.console_sessions SET ended_at = %(now)s
WHERE token_hash = %(token_hash)s AND ended_at IS NULL RETURNING id;

-- name: console_login_failed
INSERT INTO portalq.console_login_failures (at, name, ip) VALUES (%(now)s, %(name)s, %(ip)s);

-- name: console_login_failures
-- Failed sign-ins since %(since)s for this name and from this address.
SELECT (SELECT count(*) FROM portalq.console_login_failures
        WHERE name = %(name)s AND at >= %(since)s)::int AS by_name,
       (SELECT count(*) FROM portalq.console_login_failures
        WHERE ip = %(ip)s AND at >= %(since)s)::int AS by_ip;

-- name: console_login_lock
-- A sign-in's turn: attempts from one address, then for one name, go one at a time (a
-- transaction lock, always taken address first, so two never wait on each other), so
-- that parallel attempts are each counted against the limit before the next is checked.
SELECT pg_advisory_xact_lock(hashtextextended('portalq console sign-in: ' || %(key)s, 0));

-- name: console_login_failures_prune
DELETE FROM portalq.console_login_failures WHERE at < %(before)s;

-- name: console_sso_identity
-- The console user an OpenID Connect identity (issuer, sub) is linked to.
SELECT u.id, u.name, u.role, u.disabled_at
FROM portalq.console_sso_identities i JOIN portalq.console_users u ON u.id = i.user_id
WHERE i.issuer = %(issuer)s AND i.subject = %(subject)s;

-- name: console_sso_user_add
-- A user for a first sign-on (no password) and its identity; nothing if the name is taken.
WITH u AS (
    INSERT INTO portalq.console_users (name, role, password_hash, created_at, password_changed_at)
    VALUES (%(name)s, %(role)s, NULL, %(now)s, %(now)s)
    ON CONFLICT (name) DO NOTHING
    RETURNING id, name, role
), i AS (
    INSERT INTO portalq.console_sso_identities (issuer, subject, user_id, created_at, last_sign_in_at)
    SELECT %(issuer)s, %(subject)s, id, %(now)s, %(now)s FROM u
)
SELECT id, name, role FROM u;

-- name: console_sso_signed_in
-- A returning identity: its sign-in time, and the role its claims give today.
WITH i AS (
    UPDATE portalq.console_sso_identities SET last_sign_in_at = %(now)s
    WHERE issuer = %(issuer)s AND subject = %(subject)s RETURNING user_id
)
UPDATE portalq.console_users u SET role = %(role)s FROM i WHERE u.id = i.user_id
RETURNING u.id, u.name, u.role;

-- name: audit_add
INSERT INTO portalq.audit_log (at, actor, role, source, action, target, reason, before, after)
VALUES (%(now)s, %(actor)s, %(role)s, %(source)s, %(action)s, %(target)s, %(reason)s,
        %(before)s::jsonb, %(after)s::jsonb)
RETURNING id;

-- name: audit_list
-- Newest first, keyset on id; optional target / actor / action filters.
SELECT id, at, actor, role, source, action, target, reason, before, after FROM portalq.audit_log
WHERE id < %(before_id)s
  AND (%(target)s::text IS NULL OR target = %(target)s)
  AND (%(actor)s::text IS NULL OR actor = %(actor)s)
  AND (%(action)s::text IS NULL OR action = %(action)s)
ORDER BY id DESC LIMIT %(limit)s;

-- name: console_jobs_page
-- One page of the console's job list, newest first, keyset on id. Bounded: at most
-- %(window)s candidate rows (below %(before_id)s and at or above %(floor_id)s, in id order
-- of the index the status / portal / job type / order filter picks) are read, and the reading stops
-- as soon as %(limit)s of them pass the filters that have no index of their own (hit);
-- only the page's rows are fetched again (by primary key). Run without a prepared plan
-- (each run planned for its parameters: a status filter uses its partial index). A payload
-- field is tested as the list shows it: SSN-shaped text masked (migration 0027), so that
-- searching digits the page hides finds nothing. The masking (a regular expression) runs
-- only on the rows whose text holds the value as stored: a value without ``*`` found in
-- the masked text is in the stored one too (masking only takes text out), and the
-- expression is evaluated left to right (a 20,000-row window: ~26 ms with the masking on
-- every row, ~13 ms so; 10-11 ms before 0027; one run each on a busy machine).
SELECT j.id, j.job_type, j.order_id, j.portal, j.status, j.priority, j.run_at, j.attempts,
       j.max_attempts, j.last_error, j.created_at, j.updated_at, j.finished_at,
       j.checkpoint->>'step' AS step, j.payload #>> %(field_path)s::text[] AS matched
FROM (
    SELECT id FROM (
        SELECT id,
               (%(created_from)s::timestamptz IS NULL OR created_at >= %(created_from)s)
               AND (%(created_to)s::timestamptz IS NULL OR created_at < %(created_to)s)
               AND (%(field_path)s::text[] IS NULL
                    OR coalesce((lower(payload #>> %(field_path)s::text[]) LIKE %(field_like)s
                                 OR strpos(%(field_like)s, '*') > 0)
                                AND lower(portalq.portalq_search_text(
                                    payload #>> %(field_path)s::text[])) LIKE %(field_like)s,
                                false)) AS hit
        FROM portalq.job_queue
        WHERE id < %(before_id)s AND id >= %(floor_id)s
          AND (%(status)s::text IS NULL OR status = %(status)s)
          AND (%(portal)s::text IS NULL OR portal = %(portal)s)
          AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
          AND (%(order_id)s::text IS NULL OR order_id = %(order_id)s)
        ORDER BY id DESC LIMIT %(window)s
    ) w WHERE hit ORDER BY id DESC LIMIT %(limit)s
) page CROSS JOIN LATERAL (SELECT * FROM portalq.job_queue q WHERE q.id = page.id) j
ORDER BY j.id DESC;

-- name: console_jobs_window
-- For a page that came back short: the lowest id its window read and how many (index
-- only), where a continued search starts.
SELECT min(id) AS scanned_to, count(*)::int AS scanned FROM (
    SELECT id FROM portalq.job_queue
    WHERE id < %(before_id)s AND id >= %(floor_id)s
      AND (%(status)s::text IS NULL OR status = %(status)s)
      AND (%(portal)s::text IS NULL OR portal = %(portal)s)
      AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
      AND (%(order_id)s::text IS NULL OR order_id = %(order_id)s)
    ORDER BY id DESC LIMIT %(window)s
) w;

-- name: console_job_ids_matching
-- The ids a bulk action over "everything the filter matches" acts on, capped at %(limit)s;
-- same filters as console_jobs_page, restricted to %(statuses)s (the states the action
-- allows). Unbounded window: a bulk action is rare, previewed, and capped.
SELECT id, payload #>> %(field_path)s::text[] AS matched FROM portalq.job_queue j
WHERE status = ANY(%(statuses)s::text[])
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(portal)s::text IS NULL OR portal = %(portal)s)
  AND (%(order_id)s::text IS NULL OR order_id = %(order_id)s)
  AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
  AND (%(created_from)s::timestamptz IS NULL OR created_at >= %(created_from)s)
  AND (%(created_to)s::timestamptz IS NULL OR created_at < %(created_to)s)
  AND (%(field_path)s::text[] IS NULL
       OR (lower(j.payload #>> %(field_path)s::text[]) LIKE %(field_like)s
           OR strpos(%(field_like)s, '*') > 0)
          AND lower(portalq.portalq_search_text(j.payload #>> %(field_path)s::text[]))
              LIKE %(field_like)s)
ORDER BY id DESC LIMIT %(limit)s;

-- name: console_jobs_status_of
SELECT id, status FROM portalq.job_queue WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id DESC;

-- name: console_first_id_at
-- The lowest job id enqueued at or after %(at)s: a binary search over ids (job ids and
-- created_at rise together), about 25 primary-key probes at 10 million rows, in one
-- statement. A time range becomes an id range the primary key serves.
WITH RECURSIVE b(lo, hi) AS (
    SELECT (SELECT id FROM portalq.job_queue ORDER BY id LIMIT 1),
           (SELECT id FROM portalq.job_queue ORDER BY id DESC LIMIT 1) + 1
    UNION ALL
    SELECT CASE WHEN m.id IS NULL OR m.created_at >= %(at)s THEN b.lo ELSE m.id + 1 END,
           CASE WHEN m.id IS NULL OR m.created_at >= %(at)s THEN k.mid ELSE b.hi END
    FROM b CROSS JOIN LATERAL (SELECT (b.lo + b.hi) / 2 AS mid) k
    LEFT JOIN LATERAL (SELECT id, created_at FROM portalq.job_queue WHERE id >= k.mid
                       ORDER BY id LIMIT 1) m ON true
    WHERE b.lo < b.hi
)
SELECT j.id FROM portalq.job_queue j
WHERE j.id >= (SELECT lo FROM b WHERE lo >= hi LIMIT 1) AND j.created_at >= %(at)s
ORDER BY j.id LIMIT 1;

-- name: console_depth
-- Queue depth of the unfinished states by portal: read through the partial indexes
-- (claim, running, failed), never the finished bulk of the table.
SELECT portal, status, count(*)::int AS n FROM portalq.job_queue
WHERE status IN ('pending', 'deferred') GROUP BY portal, status
UNION ALL
SELECT portal, 'running', count(*)::int FROM portalq.job_queue WHERE status = 'running'
GROUP BY portal
UNION ALL
SELECT portal, 'failed', count(*)::int FROM portalq.job_queue WHERE status = 'failed'
GROUP BY portal;

-- name: console_throughput
-- Completed and failed jobs per hour since %(since)s (the finished and failed indexes).
SELECT date_trunc('hour', finished_at) AS hour, 'completed' AS status, count(*)::int AS n
FROM portalq.job_queue WHERE status IN ('completed', 'cancelled') AND finished_at >= %(since)s
  AND status = 'completed'
GROUP BY 1
UNION ALL
SELECT date_trunc('hour', finished_at), 'failed', count(*)::int
FROM portalq.job_queue WHERE status = 'failed' AND finished_at >= %(since)s
GROUP BY 1;

-- name: console_table_estimate
SELECT greatest(reltuples, 0)::bigint AS rows FROM pg_class WHERE oid = 'portalq.job_queue'::regclass;

-- name: console_artifacts
SELECT id, attempt, kind, path, note, created_at FROM portalq.job_artifacts WHERE job_id = %(job_id)s
ORDER BY attempt, id;

-- name: console_artifact
SELECT id, job_id, attempt, kind, path FROM portalq.job_artifacts WHERE id = %(id)s;

-- name: console_document
-- A stored document, sealed (key_id: the KEK its data key is wrapped by; NULL for rows
-- written before documents were sealed): jobs.admin.reads.document opens it.
SELECT name, content_type, data, key_id FROM portalq.job_documents
WHERE job_id = %(job_id)s AND name = %(name)s;

-- name: escalation_message_store
-- The mail as built for this send (scrubbed; jobs.operations.outbox.store_message), in the send's
-- transaction: the console shows the message itself.
UPDATE portalq.escalations SET message = %(message)s WHERE id = %(id)s;

-- name: escalation_job_secrets
SELECT id, job_type, payload, secret_key_id, secret_dek, secret_data
FROM portalq.job_queue WHERE id = %(id)s;

-- name: console_job_escalations
SELECT e.id, e.attempt, e.kind, e.reason, e.created_at, e.sent_at, e.send_attempts,
       e.last_send_error, e.message, h.acknowledged_at, h.acknowledged_by, h.assigned_to,
       h.resolved_at, h.resolved_by
FROM portalq.escalations e LEFT JOIN portalq.escalation_handling h ON h.escalation_id = e.id
WHERE e.job_id = %(job_id)s ORDER BY e.id;

-- name: console_escalations_inbox
-- What needs a human, oldest first: the escalations nobody resolved whose cause is still
-- there -- a failed job's latest failure escalation, a question still open (its attempt's,
-- unanswered, before its deadline), an approval still pending -- and no later escalation
-- of the job of the same sort replaced it. Read from what can still need a person (failed
-- jobs through their partial index, open questions, approval escalations through theirs),
-- never from every escalation ever raised: nothing writes when a cause goes (a worker, the
-- CLI, a retry), so the ones whose cause went stay in the table, and are not read here.
WITH open AS (
    SELECT e.id FROM portalq.job_queue j
    CROSS JOIN LATERAL (SELECT l.id FROM portalq.escalations l WHERE l.job_id = j.id
                          AND l.kind NOT IN ('question', 'approval')
                        ORDER BY l.id DESC LIMIT 1) e
    WHERE j.status = 'failed'
    UNION
    SELECT e.id FROM portalq.job_questions q
    JOIN portalq.escalations e ON e.job_id = q.job_id AND e.attempt = q.attempt AND e.kind = 'question'
    JOIN portalq.job_queue j ON j.id = q.job_id
    WHERE q.answered_at IS NULL AND q.deadline > %(now)s
      AND j.status NOT IN ('completed', 'cancelled')
      AND NOT EXISTS (SELECT 1 FROM portalq.escalations l WHERE l.job_id = e.job_id
                        AND l.kind = 'question' AND l.id > e.id)
    UNION
    SELECT e.id FROM portalq.escalations e JOIN portalq.job_queue j ON j.id = e.job_id
    WHERE e.kind = 'approval' AND j.status NOT IN ('completed', 'cancelled')
      AND j.checkpoint #>> '{approval,state}' = 'pending'
      AND NOT EXISTS (SELECT 1 FROM portalq.escalations l WHERE l.job_id = e.job_id
                        AND l.kind = 'approval' AND l.id > e.id)
    UNION
    -- a changed page: open while its portal stays paused for it (read from the few
    -- portals paused so, through their waiting jobs)
    SELECT e.id FROM portalq.portals p
    JOIN portalq.job_queue j ON j.portal = p.code AND j.status IN ('pending', 'deferred')
    JOIN portalq.escalations e ON e.job_id = j.id AND e.kind = 'portal_changed'
    WHERE (p.paused_by = 'drift' OR p.drift_pauses ? j.job_type)
      AND NOT EXISTS (SELECT 1 FROM portalq.escalations l WHERE l.job_id = e.job_id
                        AND l.kind = 'portal_changed' AND l.id > e.id)
)
SELECT e.id, e.job_id, e.attempt, e.kind, e.reason, e.created_at, e.sent_at,
       j.job_type, j.order_id, j.portal, j.status, j.last_error,
       j.checkpoint #>> '{approval,state}' AS approval_state,
       h.acknowledged_at, h.acknowledged_by, h.assigned_to, h.resolved_at, h.resolved_by,
       true AS live
FROM open o JOIN portalq.escalations e ON e.id = o.id JOIN portalq.job_queue j ON j.id = e.job_id
LEFT JOIN portalq.escalation_handling h ON h.escalation_id = e.id
WHERE h.resolved_at IS NULL
ORDER BY e.created_at, e.id LIMIT %(limit)s;

-- name: console_escalations_all
-- Every escalation, oldest first (the inbox's "all"): resolved, closed by itself (``live``
-- false: its cause went, console_escalations_inbox's rule) or still open.
SELECT e.id, e.job_id, e.attempt, e.kind, e.reason, e.created_at, e.sent_at,
       j.job_type, j.order_id, j.portal, j.status, j.last_error,
       j.checkpoint #>> '{approval,state}' AS approval_state,
       h.acknowledged_at, h.acknowledged_by, h.assigned_to, h.resolved_at, h.resolved_by,
       (CASE e.kind
            WHEN 'question' THEN j.status NOT IN ('completed', 'cancelled') AND EXISTS (
                SELECT 1 FROM portalq.job_questions q WHERE q.job_id = e.job_id
                  AND q.attempt = e.attempt AND q.answered_at IS NULL
                  AND q.deadline > %(now)s)
            WHEN 'approval' THEN j.status NOT IN ('completed', 'cancelled')
                                 AND j.checkpoint #>> '{approval,state}' = 'pending'
            WHEN 'portal_changed' THEN j.status IN ('pending', 'deferred') AND EXISTS (
                SELECT 1 FROM portalq.portals p WHERE p.code = j.portal
                  AND (p.paused_by = 'drift' OR p.drift_pauses ? j.job_type))
            ELSE j.status = 'failed'
        END) AND NOT EXISTS (
            SELECT 1 FROM portalq.escalations l WHERE l.job_id = e.job_id AND l.id > e.id
              AND (l.kind IN ('question', 'approval')) = (e.kind IN ('question', 'approval'))
              AND (l.kind = 'question') = (e.kind = 'question')) AS live
FROM portalq.escalations e JOIN portalq.job_queue j ON j.id = e.job_id
LEFT JOIN portalq.escalation_handling h ON h.escalation_id = e.id
ORDER BY e.created_at, e.id LIMIT %(limit)s;

-- name: console_needs_you
-- How many escalations need a person (console_escalations_inbox's rows), up to %(cap)s:
-- the count in the console's navigation and on its overview. Its parts never name the same
-- escalation twice (kinds and job states apart; a question's escalation DISTINCT however
-- many questions it asked), so UNION ALL: the count stops at the cap, never reads every failed job.
WITH open AS (
    SELECT e.id FROM portalq.job_queue j
    CROSS JOIN LATERAL (SELECT l.id FROM portalq.escalations l WHERE l.job_id = j.id
                          AND l.kind NOT IN ('question', 'approval')
                        ORDER BY l.id DESC LIMIT 1) e
    WHERE j.status = 'failed'
    UNION ALL
    SELECT DISTINCT e.id FROM portalq.job_questions q
    JOIN portalq.escalations e ON e.job_id = q.job_id AND e.attempt = q.attempt AND e.kind = 'question'
    JOIN portalq.job_queue j ON j.id = q.job_id
    WHERE q.answered_at IS NULL AND q.deadline > %(now)s
      AND j.status NOT IN ('completed', 'cancelled')
      AND NOT EXISTS (SELECT 1 FROM portalq.escalations l WHERE l.job_id = e.job_id
                        AND l.kind = 'question' AND l.id > e.id)
    UNION ALL
    SELECT e.id FROM portalq.escalations e JOIN portalq.job_queue j ON j.id = e.job_id
    WHERE e.kind = 'approval' AND j.status NOT IN ('completed', 'cancelled')
      AND j.checkpoint #>> '{approval,state}' = 'pending'
      AND NOT EXISTS (SELECT 1 FROM portalq.escalations l WHERE l.job_id = e.job_id
                        AND l.kind = 'approval' AND l.id > e.id)
    UNION ALL
    -- a changed page: open while its portal stays paused for it (read from the few
    -- portals paused so, through their waiting jobs)
    SELECT e.id FROM portalq.portals p
    JOIN portalq.job_queue j ON j.portal = p.code AND j.status IN ('pending', 'deferred')
    JOIN portalq.escalations e ON e.job_id = j.id AND e.kind = 'portal_changed'
    WHERE (p.paused_by = 'drift' OR p.drift_pauses ? j.job_type)
      AND NOT EXISTS (SELECT 1 FROM portalq.escalations l WHERE l.job_id = e.job_id
                        AND l.kind = 'portal_changed' AND l.id > e.id)
)
SELECT count(*)::int AS n FROM (
    SELECT 1 FROM open o LEFT JOIN portalq.escalation_handling h ON h.escalation_id = o.id
    WHERE h.resolved_at IS NULL LIMIT %(cap)s
) x;

-- name: console_escalation
SELECT e.id, e.job_id, h.acknowledged_at, h.acknowledged_by, h.assigned_to, h.resolved_at,
       h.resolved_by
FROM portalq.escalations e LEFT JOIN portalq.escalation_handling h ON h.escalation_id = e.id
WHERE e.id = %(id)s FOR UPDATE OF e;

-- name: console_escalation_set
INSERT INTO portalq.escalation_handling (escalation_id, acknowledged_at, acknowledged_by, assigned_to,
                                 resolved_at, resolved_by, updated_at)
VALUES (%(id)s, %(acknowledged_at)s, %(acknowledged_by)s, %(assigned_to)s, %(resolved_at)s,
        %(resolved_by)s, %(now)s)
ON CONFLICT (escalation_id) DO UPDATE SET
    acknowledged_at = EXCLUDED.acknowledged_at, acknowledged_by = EXCLUDED.acknowledged_by,
    assigned_to = EXCLUDED.assigned_to, resolved_at = EXCLUDED.resolved_at,
    resolved_by = EXCLUDED.resolved_by, updated_at = EXCLUDED.updated_at;

-- name: console_needs_questions
-- The "Needs you" page's open questions (console_escalations_inbox's question rows, with
-- the question itself): unanswered, before their deadline, their escalation not resolved.
SELECT q.id, q.job_id, q.attempt, q.question, q.asked_at, q.deadline, j.job_type,
       j.order_id, j.portal
FROM portalq.job_questions q
JOIN portalq.escalations e ON e.job_id = q.job_id AND e.attempt = q.attempt AND e.kind = 'question'
JOIN portalq.job_queue j ON j.id = q.job_id
LEFT JOIN portalq.escalation_handling h ON h.escalation_id = e.id
WHERE q.answered_at IS NULL AND q.deadline > %(now)s
  AND j.status NOT IN ('completed', 'cancelled') AND h.resolved_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM portalq.escalations l WHERE l.job_id = e.job_id
                    AND l.kind = 'question' AND l.id > e.id)
ORDER BY q.deadline, q.id LIMIT %(limit)s;

-- name: console_needs_approvals
-- The "Needs you" page's approvals (console_escalations_inbox's approval rows) with what
-- the checkpoint recorded of the request (its digest, when asked, changed since approved).
SELECT e.id AS escalation_id, e.job_id, e.attempt, e.created_at, j.job_type, j.order_id,
       j.portal, j.checkpoint -> 'approval' AS approval
FROM portalq.escalations e JOIN portalq.job_queue j ON j.id = e.job_id
LEFT JOIN portalq.escalation_handling h ON h.escalation_id = e.id
WHERE e.kind = 'approval' AND j.status NOT IN ('completed', 'cancelled')
  AND j.checkpoint #>> '{approval,state}' = 'pending' AND h.resolved_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM portalq.escalations l WHERE l.job_id = e.job_id
                    AND l.kind = 'approval' AND l.id > e.id)
ORDER BY e.created_at, e.id LIMIT %(limit)s;

-- name: console_needs_failed_groups
-- The "Needs you" page's failed jobs, grouped by cause here (a row per cause, however many
-- jobs failed): console_escalations_inbox's failure rows (the job's latest failure
-- escalation, not resolved), through the failed jobs' partial index, except those past a
-- point of no return (a submission pressed, never confirmed: console_needs_uncertain). The
-- cause: the error's first line, its first 200 characters, each run of digits as "#"
-- (jobs.console_needs.cause_of), compared byte by byte (grouping needs no language's
-- order); the sample: the oldest job's error. A group carries its count and only its oldest
-- %(ids_cap)s ids (the most a bulk action takes: an outage's fifty thousand failed jobs are
-- one line and one button, not a page of ids).
WITH f AS (
    SELECT j.id, j.job_type, j.portal, j.finished_at, e.kind,
           regexp_replace(left(coalesce(nullif(split_part(split_part(
               btrim(j.last_error, E' \t\r\n'), E'\n', 1), E'\r', 1), ''),
               'no error recorded'), 200), '[0-9]+', '#', 'g') COLLATE "C" AS cause
    FROM portalq.job_queue j
    CROSS JOIN LATERAL (SELECT l.id, l.kind FROM portalq.escalations l WHERE l.job_id = j.id
                          AND l.kind NOT IN ('question', 'approval')
                        ORDER BY l.id DESC LIMIT 1) e
    LEFT JOIN portalq.escalation_handling h ON h.escalation_id = e.id
    WHERE j.status = 'failed' AND h.resolved_at IS NULL
      AND NOT coalesce(jsonb_path_exists(j.checkpoint, 'strict $.submissions.* ? '
                                         '(@.state == "submitting")', '{}', true), false)
), g AS (
    SELECT portal, job_type, kind, cause, (array_agg(id ORDER BY id))[:%(ids_cap)s] AS ids,
           count(*)::int AS n, min(id) AS oldest, min(finished_at) AS first,
           max(finished_at) AS last
    FROM f GROUP BY portal, job_type, kind, cause
)
SELECT g.portal, g.job_type, g.kind, g.cause, g.ids, g.n, g.first, g.last,
       (SELECT left(j.last_error, 500) FROM portalq.job_queue j WHERE j.id = g.oldest) AS sample
FROM g ORDER BY g.n DESC, g.portal, g.cause LIMIT %(limit)s;

-- name: console_needs_uncertain
-- The "Needs you" page's failed jobs past a point of no return (a submission pressed,
-- never confirmed), one by one, oldest first, with their submission records.
SELECT j.id, j.job_type, j.order_id, j.portal, j.last_error, j.finished_at, e.kind,
       j.checkpoint -> 'submissions' AS submissions
FROM portalq.job_queue j
CROSS JOIN LATERAL (SELECT l.id, l.kind FROM portalq.escalations l WHERE l.job_id = j.id
                      AND l.kind NOT IN ('question', 'approval')
                    ORDER BY l.id DESC LIMIT 1) e
LEFT JOIN portalq.escalation_handling h ON h.escalation_id = e.id
WHERE j.status = 'failed' AND h.resolved_at IS NULL
  AND jsonb_path_exists(j.checkpoint, 'strict $.submissions.* ? (@.state == "submitting")',
                        '{}', true)
ORDER BY j.id LIMIT %(limit)s;

-- name: console_needs_changed
-- The "Needs you" page's changed pages (console_needs_you's portal_changed rows): a job that
-- met a page its flow does not know, its portal paused for it until a person resumes it,
-- the escalation not resolved (read from the few portals paused so, through their jobs).
SELECT e.id, e.job_id, e.reason, e.created_at, j.job_type, j.order_id, j.portal,
       coalesce(p.drift_pauses #>> ARRAY[j.job_type, 'reason'], p.pause_reason) AS pause_reason,
       coalesce((p.drift_pauses #>> ARRAY[j.job_type, 'at'])::timestamptz, p.paused_at)
           AS paused_at
FROM portalq.portals p
JOIN portalq.job_queue j ON j.portal = p.code AND j.status IN ('pending', 'deferred')
JOIN portalq.escalations e ON e.job_id = j.id AND e.kind = 'portal_changed'
LEFT JOIN portalq.escalation_handling h ON h.escalation_id = e.id
WHERE (p.paused_by = 'drift' OR p.drift_pauses ? j.job_type) AND h.resolved_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM portalq.escalations l WHERE l.job_id = e.job_id
                    AND l.kind = 'portal_changed' AND l.id > e.id)
ORDER BY e.id LIMIT %(limit)s;

-- name: console_needs_waiting
-- Jobs waiting on a portal's decision past the time the portal normally takes
-- (jobs.waiting's checkpoint marker ``waiting``: expected_by before now).
SELECT id, job_type, order_id, portal, run_at, checkpoint -> 'waiting' AS waiting
FROM portalq.job_queue
WHERE status = 'deferred' AND checkpoint ? 'waiting'
  AND (checkpoint #>> '{waiting,expected_by}')::timestamptz < %(now)s
ORDER BY id LIMIT %(limit)s;

-- name: console_needs_waiting_count
-- How many of console_needs_waiting's jobs there are, up to %(cap)s (added to the count of
-- what needs a person).
SELECT count(*)::int AS n FROM (
    SELECT 1 FROM portalq.job_queue
    WHERE status = 'deferred' AND checkpoint ? 'waiting'
      AND (checkpoint #>> '{waiting,expected_by}')::timestamptz < %(now)s
    LIMIT %(cap)s
) x;

-- name: console_closures
SELECT id, portal, starts_at, ends_at, reason FROM portalq.portal_closures
WHERE ends_at > %(after)s ORDER BY starts_at, id;

-- name: console_closure_delete
DELETE FROM portalq.portal_closures WHERE id = %(id)s AND portal = %(portal)s
RETURNING id, starts_at, ends_at, reason;

-- name: console_jobs_search
-- The job list's substring search of a searchable payload field through its trigram index
-- on job_search (migration 0026: a row per job, written once, never on the queue's hot
-- path), for a search the id window did not fill (few matches: the index finds them
-- wherever they are); each match's job is then read by primary key and the other filters
-- tested on it. ``job_id + 0``: never job_search's primary key read backwards filtering as
-- it goes, which the planner may pick for a LIMIT and which reads the whole table when the
-- matches are few and old. Only the branch of %(search_field)s is left once the statement
-- is planned for its parameters (run without a prepared plan, as console_jobs_page).
-- job_search holds the texts masked as the pages show them (migration 0027).
SELECT j.id, j.job_type, j.order_id, j.portal, j.status, j.priority, j.run_at, j.attempts,
       j.max_attempts, j.last_error, j.created_at, j.updated_at, j.finished_at,
       j.checkpoint->>'step' AS step, j.payload #>> %(field_path)s::text[] AS matched
FROM portalq.job_search s
JOIN portalq.job_queue j ON j.id = s.job_id
WHERE s.job_id + 0 < %(before_id)s AND s.job_id + 0 >= %(floor_id)s
  AND ((%(search_field)s::text = 'legal_name' AND s.legal_name ILIKE %(field_like)s)
       OR (%(search_field)s::text = 'company_name' AND s.company_name ILIKE %(field_like)s)
       OR (%(search_field)s::text = 'names' AND s.names ILIKE %(field_like)s)
       OR (%(search_field)s::text = 'applicant.name'
           AND s.applicant_name ILIKE %(field_like)s))
  AND (%(status)s::text IS NULL OR j.status = %(status)s)
  AND (%(portal)s::text IS NULL OR j.portal = %(portal)s)
  AND (%(job_type)s::text IS NULL OR j.job_type = %(job_type)s)
  AND (%(order_id)s::text IS NULL OR j.order_id = %(order_id)s)
  AND (%(created_from)s::timestamptz IS NULL OR j.created_at >= %(created_from)s)
  AND (%(created_to)s::timestamptz IS NULL OR j.created_at < %(created_to)s)
ORDER BY s.job_id + 0 DESC LIMIT %(limit)s;

-- name: search_mark
-- The search indexer's high-water mark (migration 0033) and, where it stopped at a gap in
-- the ids, whether that gap has settled: %(settle_seconds)s have passed since it was seen
-- (ripe: an id is written at most that long after it is taken, jobs.id_blocks), and every
-- transaction that existed once it was ripe is over (``pending_xmax``, noted then, at most
-- the current snapshot's xmin; not noted yet: none may run now). Locked: one indexer at a
-- time, whatever the number of nodes.
SELECT indexed_to, pending_to, ripe,
       ripe AND coalesce(pending_xmax, pg_snapshot_xmax(pg_current_snapshot())::text::bigint)
                <= pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS settled
FROM (SELECT *, pending_since <= clock_timestamp() - make_interval(secs => %(settle_seconds)s)
                AS ripe
      FROM portalq.job_search_mark FOR UPDATE) m;

-- name: search_mark_read
-- The mark as the console shows it: the job it is at, and whether newer jobs are above it.
SELECT m.indexed_to, m.checked_at, j.created_at AS indexed_at,
       EXISTS (SELECT 1 FROM portalq.job_queue WHERE id > m.indexed_to) AS behind
FROM portalq.job_search_mark m LEFT JOIN portalq.job_queue j ON j.id = m.indexed_to;

-- name: search_behind
-- Whether there is anything above the mark: read without a lock or an xid (an idle indexer
-- writes nothing).
SELECT EXISTS (SELECT 1 FROM portalq.job_queue
               WHERE id > (SELECT indexed_to FROM portalq.job_search_mark)) AS behind;

-- name: search_ids_above
-- The ids above the mark, in order (the primary key only): where they run on without a gap
-- the mark can follow them.
SELECT id FROM portalq.job_queue WHERE id > %(after)s ORDER BY id LIMIT %(limit)s;

-- name: search_index_range
-- The rows of the jobs in (%(after)s, %(upto)s] that have a searchable field, masked as the
-- pages show them (migration 0028). ON CONFLICT DO NOTHING: a payload patch's row trigger
-- may have written a job's row already, with a newer text than this statement's snapshot.
INSERT INTO portalq.job_search (job_id, legal_name, company_name, names, applicant_name)
SELECT * FROM (
    SELECT n.id, portalq.portalq_search_text(n.payload #>> '{legal_name}'::text[]) AS a,
           portalq.portalq_search_text(n.payload #>> '{company_name}'::text[]) AS b,
           portalq.portalq_search_text(n.payload #>> '{names}'::text[]) AS c,
           portalq.portalq_search_text(n.payload #>> '{applicant,name}'::text[]) AS d
    FROM portalq.job_queue n WHERE n.id > %(after)s AND n.id <= %(upto)s
) f WHERE num_nonnulls(a, b, c, d) > 0
ON CONFLICT (job_id) DO NOTHING;

-- name: search_mark_set
-- A new gap: seen now, its transactions noted once it is ripe (see search_mark).
UPDATE portalq.job_search_mark
SET indexed_to = %(indexed_to)s, checked_at = clock_timestamp(),
    pending_to = %(pending_to)s,
    pending_since = CASE WHEN %(pending_to)s::bigint IS NULL THEN NULL
                         WHEN %(new_gap)s THEN clock_timestamp() ELSE pending_since END,
    pending_xmax = CASE WHEN %(pending_to)s::bigint IS NULL OR %(new_gap)s THEN NULL
                        WHEN %(ripe)s AND pending_xmax IS NULL
                            THEN pg_snapshot_xmax(pg_current_snapshot())::text::bigint
                        ELSE pending_xmax END;

-- name: search_rebuild
-- The index started over: every row out (the search tests the queue meanwhile), the mark at 0.
WITH gone AS (DELETE FROM portalq.job_search RETURNING 1)
UPDATE portalq.job_search_mark SET indexed_to = 0, pending_to = NULL, pending_xmax = NULL,
    pending_since = NULL, checked_at = clock_timestamp()
RETURNING (SELECT count(*) FROM gone) AS removed,
          (SELECT max(id) FROM portalq.job_queue) AS newest;

-- name: console_status_counts_small
-- Jobs per status counted exactly, from at most %(limit)s rows (bounded however big the
-- table): when fewer are read, the table holds no more and the counts are exact -- at small
-- scale the statistics' estimates are far off (an ANALYZE of a few rows goes stale at once).
SELECT status, count(*)::bigint AS n
FROM (SELECT status FROM portalq.job_queue LIMIT %(limit)s) x
GROUP BY status ORDER BY n DESC, status;

-- name: console_status_estimates
-- Jobs per status as the table's statistics estimate them (the last ANALYZE's most common
-- values times the planner's row count): catalog reads only, never a count over millions.
-- A status too rare to be among the most common values is absent.
SELECT s.status, round(s.freq * greatest(c.reltuples, 0))::bigint AS n
FROM pg_class c
JOIN pg_namespace ns ON ns.oid = c.relnamespace
JOIN pg_stats st ON st.schemaname = ns.nspname AND st.tablename = c.relname
                AND st.attname = 'status'
CROSS JOIN LATERAL unnest(st.most_common_vals::text::text[], st.most_common_freqs)
                   AS s(status, freq)
WHERE c.oid = 'portalq.job_queue'::regclass
ORDER BY n DESC;

-- name: seed_portal
-- A declared portal (portals.catalogue.declare_portal) the database does not have yet; an
-- existing row is never touched (its operator may have changed it).
INSERT INTO portalq.portals (code, name, timezone, holiday_country, holiday_subdiv,
                     max_concurrent_sessions, cutoff_minutes, url)
VALUES (%(code)s, %(name)s, %(timezone)s, %(holiday_country)s, %(holiday_subdiv)s,
        %(max_concurrent_sessions)s, %(cutoff_minutes)s, %(url)s)
ON CONFLICT (code) DO NOTHING
RETURNING code;

-- name: seed_portal_hours
INSERT INTO portalq.portal_hours (portal, weekday, opens, closes)
SELECT %(code)s, w.weekday, w.opens, w.closes
FROM unnest(%(weekdays)s::smallint[], %(opens)s::time[], %(closes)s::time[])
     AS w(weekday, opens, closes);

-- name: account_add
INSERT INTO portalq.portal_accounts (portal, name, username, created_at)
SELECT %(portal)s, %(name)s, %(username)s, %(now)s
WHERE EXISTS (SELECT 1 FROM portalq.portals WHERE code = %(portal)s)
ON CONFLICT (portal, name) DO NOTHING
RETURNING portal, name, username;

-- name: account_list
SELECT portal, name, username, paused_at, pause_reason, paused_by, in_use_by, in_use_until,
       last_used_at, password_expires_on, session_state IS NOT NULL AS has_session
FROM portalq.portal_accounts
WHERE %(portal)s::text IS NULL OR portal = %(portal)s
ORDER BY portal, name;

-- name: account_pause
UPDATE portalq.portal_accounts SET paused_at = %(now)s, pause_reason = %(reason)s, paused_by = %(by)s
WHERE portal = %(portal)s AND name = %(name)s AND paused_at IS NULL
RETURNING portal, name;

-- name: account_resume
-- the jobs that waited because every account of the portal was paused run at once
WITH resumed AS (
    UPDATE portalq.portal_accounts SET paused_at = NULL, pause_reason = NULL, paused_by = NULL
    WHERE portal = %(portal)s AND name = %(name)s AND paused_at IS NOT NULL
    RETURNING portal, name
), woken AS (
    UPDATE portalq.job_queue SET run_at = %(now)s, updated_at = %(now)s
    WHERE portal = %(portal)s AND status = 'deferred' AND last_error = %(waiting)s
      AND EXISTS (SELECT 1 FROM resumed)
    RETURNING id
)
SELECT r.portal, r.name, (SELECT count(*) FROM woken)::int AS woken,
       pg_notify('portalq_jobs', 'account resumed')
FROM resumed r;

-- name: account_take
-- One signed-in session per account across every node: the least recently used account of
-- the portal that is neither paused nor held (a hold past its time is free again).
UPDATE portalq.portal_accounts a
SET in_use_by = %(holder)s, in_use_until = %(until)s, last_used_at = %(now)s
FROM (SELECT portal, name FROM portalq.portal_accounts
      WHERE portal = %(portal)s AND paused_at IS NULL
        AND (%(name)s::text IS NULL OR name = %(name)s)
        AND (in_use_by IS NULL OR in_use_until < %(now)s OR in_use_by = %(holder)s)
      ORDER BY last_used_at NULLS FIRST, name
      LIMIT 1 FOR UPDATE SKIP LOCKED) c
WHERE a.portal = c.portal AND a.name = c.name
RETURNING a.portal, a.name, a.username, a.password_expires_on;

-- name: account_release
UPDATE portalq.portal_accounts SET in_use_by = NULL, in_use_until = NULL
WHERE portal = %(portal)s AND name = %(name)s AND in_use_by = %(holder)s;

-- name: account_counts
SELECT count(*) FILTER (WHERE paused_at IS NULL)::int AS usable, count(*)::int AS total
FROM portalq.portal_accounts WHERE portal = %(portal)s;

-- name: account_password_expiry
-- the portal warned that the password expires: kept on the account, and the admins told
-- (a notice mailed by the outbox; at most one a day per account)
WITH upd AS (
    UPDATE portalq.portal_accounts SET password_expires_on = %(on)s
    WHERE portal = %(portal)s AND name = %(name)s
    RETURNING portal
)
INSERT INTO portalq.portal_notices (portal, kind, reason, created_at, next_try_at)
SELECT u.portal, 'password_expiring', %(reason)s, %(now)s, %(now)s FROM upd u
WHERE NOT EXISTS (SELECT 1 FROM portalq.portal_notices n
                  WHERE n.portal = u.portal AND n.kind = 'password_expiring'
                    AND n.reason = %(reason)s AND n.created_at > %(now)s - interval '1 day');

-- name: question_ask
INSERT INTO portalq.job_questions (job_id, attempt, question, asked_at, deadline)
VALUES (%(job_id)s, %(attempt)s, %(question)s, %(now)s, %(deadline)s)
RETURNING id;

-- name: question_open
-- the job's question still waiting for an answer (the newest), for `jobs answer`
SELECT id, question, deadline FROM portalq.job_questions
WHERE job_id = %(job_id)s AND answered_at IS NULL AND deadline > %(now)s
ORDER BY id DESC LIMIT 1 FOR UPDATE;

-- name: question_answer
WITH a AS (
    UPDATE portalq.job_questions SET answer = %(answer)s, answer_key_id = %(key_id)s,
                             answered_at = %(now)s, answered_by = %(by)s
    WHERE id = %(id)s AND answered_at IS NULL
    RETURNING id
)
SELECT a.id, pg_notify('portalq_answers', a.id::text) FROM a;

-- name: question_poll
SELECT answer, answer_key_id, answered_at FROM portalq.job_questions WHERE id = %(id)s;

-- name: question_read
-- the flow has the answer: erased from the database
UPDATE portalq.job_questions SET answer = NULL, answer_key_id = NULL, read_at = %(now)s
WHERE id = %(id)s;

-- name: questions_unanswered
SELECT count(*)::int AS n FROM portalq.job_questions
WHERE job_id = %(job_id)s AND answered_at IS NULL AND deadline <= %(now)s;

-- name: job_questions
SELECT id, attempt, question, asked_at, deadline, answered_at, answered_by, read_at
FROM portalq.job_questions WHERE job_id = %(job_id)s ORDER BY id;

-- name: account_session_get
SELECT session_state, session_key_id FROM portalq.portal_accounts
WHERE portal = %(portal)s AND name = %(name)s AND in_use_by = %(holder)s;

-- name: account_session_set
-- a signed-in browser session (sealed Playwright storage state), kept for the next job
UPDATE portalq.portal_accounts SET session_state = %(state)s, session_key_id = %(key_id)s
WHERE portal = %(portal)s AND name = %(name)s AND in_use_by = %(holder)s;

-- name: approval_decide
-- An admin's decision on a job waiting at its review page for approval: approved, it runs
-- again at once (and submits only if the review page matches the approved digest).
WITH upd AS (
    UPDATE portalq.job_queue
    SET checkpoint = jsonb_set(checkpoint, '{approval}', (checkpoint->'approval')
                               || jsonb_build_object('state', %(state)s::text,
                                                     'by', %(actor)s::text,
                                                     'at', %(now)s::timestamptz)),
        run_at = CASE WHEN %(state)s = 'approved' THEN %(now)s ELSE run_at END,
        updated_at = %(now)s
    WHERE id = %(id)s AND status = 'deferred'
      AND checkpoint->'approval'->>'state' = 'pending'
    RETURNING id
)
SELECT u.id, pg_notify('portalq_jobs', 'approved') FROM upd u;

-- name: webhook_add
INSERT INTO portalq.webhook_subscriptions (url, events, key_id, secret, created_at, created_by)
VALUES (%(url)s, %(events)s, %(key_id)s, %(secret)s, %(now)s, %(by)s)
RETURNING id;

-- name: webhook_list
SELECT w.id, w.url, w.events, w.created_at, w.created_by, w.failures, w.paused_at,
       w.pause_reason, w.retry_at,
       (SELECT count(*)::int FROM portalq.webhook_deliveries d
        WHERE d.subscription_id = w.id AND d.delivered_at IS NULL) AS undelivered,
       (SELECT max(d.delivered_at) FROM portalq.webhook_deliveries d
        WHERE d.subscription_id = w.id) AS last_delivered_at
FROM portalq.webhook_subscriptions w ORDER BY w.id;

-- name: webhook_exists
SELECT id FROM portalq.webhook_subscriptions WHERE id = %(id)s;

-- name: webhook_remove
DELETE FROM portalq.webhook_subscriptions WHERE id = %(id)s RETURNING id;

-- name: webhook_resume
-- A paused subscription sends again, its waiting deliveries first (nothing was dropped).
WITH w AS (
    UPDATE portalq.webhook_subscriptions
    SET paused_at = NULL, pause_reason = NULL, pause_told_at = NULL, failures = 0,
        retry_at = NULL
    WHERE id = %(id)s RETURNING id
), d AS (
    UPDATE portalq.webhook_deliveries SET next_try_at = %(now)s
    WHERE subscription_id IN (SELECT id FROM w) AND delivered_at IS NULL
)
SELECT id, pg_notify('portalq_outbox', 'webhook_deliveries') FROM w;

-- name: webhook_due_subscriptions
-- The subscriptions with a delivery waiting, past their backoff (a paused one too: its
-- probe is at the last step) and with no attempt out.
SELECT w.id FROM portalq.webhook_subscriptions w
WHERE (w.retry_at IS NULL OR w.retry_at <= %(now)s)
  AND (w.busy_until IS NULL OR w.busy_until <= %(now)s)
  AND EXISTS (SELECT 1 FROM portalq.webhook_deliveries d
              WHERE d.subscription_id = w.id AND d.delivered_at IS NULL)
ORDER BY w.id;

-- name: webhook_lease
-- A subscription's oldest waiting delivery, if the subscription is due, leased to this
-- sender until %(until)s (busy_until): the attempt runs after this commits, outside any
-- transaction; a sender that dies leaves the lease to expire (the delivery is sent again).
WITH w AS (
    SELECT w.id, w.url, w.key_id, w.secret, w.failures
    FROM portalq.webhook_subscriptions w
    WHERE w.id = %(id)s AND (w.retry_at IS NULL OR w.retry_at <= %(now)s)
      AND (w.busy_until IS NULL OR w.busy_until <= %(now)s)
    FOR UPDATE SKIP LOCKED
), d AS (
    SELECT d.id, d.msg_id, d.job_id, d.event, d.decision, d.created_at, d.attempts, d.body
    FROM portalq.webhook_deliveries d JOIN w ON d.subscription_id = w.id
    WHERE d.delivered_at IS NULL
    ORDER BY d.id LIMIT 1
), leased AS (
    UPDATE portalq.webhook_subscriptions s SET busy_until = %(until)s
    FROM d WHERE s.id = %(id)s RETURNING s.id
)
SELECT d.*, w.id AS subscription_id, w.url, w.key_id, w.secret, w.failures
FROM d, w, leased;

-- name: webhook_job
SELECT * FROM portalq.job_queue WHERE id = %(id)s;

-- name: webhook_attempted
-- One attempt of a delivery: logged; the delivery done or due again; the subscription's
-- lease ended, its run of failures counted and its backoff set -- or, on a success, both
-- reset and a pause lifted (the probe of a paused subscription answered).
WITH log AS (
    INSERT INTO portalq.webhook_attempts (delivery_id, at, status_code, error, took_ms)
    VALUES (%(id)s, %(now)s, %(status_code)s, %(error)s, %(took_ms)s)
), d AS (
    UPDATE portalq.webhook_deliveries
    SET attempts = attempts + 1, body = %(body)s,
        delivered_at = CASE WHEN %(ok)s THEN %(now)s END,
        next_try_at = coalesce(%(next_try_at)s, next_try_at),
        last_error = CASE WHEN %(ok)s THEN NULL ELSE %(error)s END
    WHERE id = %(id)s
), held AS (
    -- what `webhooks log` shows: the others wait for the subscription's next try too
    UPDATE portalq.webhook_deliveries
    SET next_try_at = CASE WHEN %(ok)s THEN %(now)s ELSE %(next_try_at)s END
    WHERE subscription_id = %(subscription_id)s AND delivered_at IS NULL AND id <> %(id)s
      AND (%(ok)s AND next_try_at > %(now)s OR NOT %(ok)s AND next_try_at < %(next_try_at)s)
)
UPDATE portalq.webhook_subscriptions
SET failures = CASE WHEN %(ok)s THEN 0 ELSE failures + 1 END,
    retry_at = %(next_try_at)s, busy_until = NULL,
    paused_at = CASE WHEN %(ok)s THEN NULL ELSE paused_at END,
    pause_reason = CASE WHEN %(ok)s THEN NULL ELSE pause_reason END,
    pause_told_at = CASE WHEN %(ok)s THEN NULL ELSE pause_told_at END
WHERE id = %(subscription_id)s
RETURNING failures;

-- name: webhook_pause
UPDATE portalq.webhook_subscriptions SET paused_at = %(now)s, pause_reason = %(reason)s
WHERE id = %(id)s AND paused_at IS NULL;

-- name: webhook_paused_untold
SELECT id, url, events, failures, paused_at, pause_reason
FROM portalq.webhook_subscriptions
WHERE paused_at IS NOT NULL AND pause_told_at IS NULL
ORDER BY id LIMIT 1
FOR UPDATE SKIP LOCKED;

-- name: webhook_pause_told
UPDATE portalq.webhook_subscriptions SET pause_told_at = %(now)s WHERE id = %(id)s;

-- name: webhook_next_try
-- When a subscription with a delivery waiting is next due (its backoff, or its attempt's
-- lease running out).
SELECT min(greatest(coalesce(w.retry_at, %(now)s), coalesce(w.busy_until, %(now)s))) AS at
FROM portalq.webhook_subscriptions w
WHERE EXISTS (SELECT 1 FROM portalq.webhook_deliveries d
              WHERE d.subscription_id = w.id AND d.delivered_at IS NULL);

-- name: webhook_log
SELECT d.msg_id, d.job_id, d.event, d.created_at, d.delivered_at, d.attempts,
       greatest(d.next_try_at, w.retry_at) AS next_try_at, d.last_error
FROM portalq.webhook_deliveries d
JOIN portalq.webhook_subscriptions w ON w.id = d.subscription_id
WHERE d.subscription_id = %(id)s
ORDER BY d.id DESC LIMIT %(limit)s;

-- name: webhook_prune
-- Delivered deliveries (and their log) past their keeping time, a batch at a time.
WITH gone AS (
    DELETE FROM portalq.webhook_deliveries WHERE id IN (
        SELECT id FROM portalq.webhook_deliveries
        WHERE delivered_at IS NOT NULL AND delivered_at < %(before)s
        ORDER BY delivered_at LIMIT %(limit)s)
    RETURNING 1
)
SELECT count(*)::int AS n FROM gone;

-- Orders as pipelines (issue 41, jobs/business/order_runs.py) ------------------------------------

-- name: order_insert
INSERT INTO portalq.orders (order_id, kind, created_at, input_key_id, input_data)
VALUES (%(order_id)s, %(kind)s, %(now)s, %(key_id)s, %(data)s)
ON CONFLICT (order_id) DO NOTHING
RETURNING order_id;

-- name: order_insert_held
-- A step waiting for others: a deferred job with no payload yet, at %(held)s (far beyond
-- any claim's now), so no claim ever reaches it; order_release_step gives it its payload.
INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, priority, run_at,
                       max_attempts, last_error, created_at, updated_at)
SELECT %(job_type)s, %(order_id)s, %(portal)s, '{}'::jsonb, 'deferred', %(priority)s::smallint,
       %(held)s, %(max_attempts)s::smallint, %(waiting)s, %(now)s, %(now)s
WHERE EXISTS (SELECT 1 FROM portalq.portals WHERE code = %(portal)s)
RETURNING id;

-- name: order_insert_steps
INSERT INTO portalq.order_steps (order_id, step, job_id, after, held)
SELECT %(order_id)s, step, job_id, string_to_array(after, ' ', ''), held
FROM unnest(%(steps)s::text[], %(job_ids)s::bigint[], %(after)s::text[], %(held)s::boolean[])
     AS s(step, job_id, after, held);

-- name: order_ready_steps
-- Held steps of %(orders)s (NULL: of every order, the leader's sweep: a release lost to
-- a crash right after its step's completion is made there) whose every predecessor completed (a pruned predecessor was
-- completed or cancelled: a cancelled order's steps are no longer held), locked so two
-- nodes never build one step twice.
SELECT s.order_id, s.step, s.job_id, o.kind, o.input_key_id, o.input_data, q.priority
FROM portalq.order_steps s
JOIN portalq.orders o ON o.order_id = s.order_id
JOIN portalq.job_queue q ON q.id = s.job_id
WHERE s.held AND (%(orders)s::text[] IS NULL OR s.order_id = ANY(%(orders)s::text[]))
  AND o.cancelled_at IS NULL
  AND q.status = 'deferred' AND q.run_at = %(held)s
  AND NOT EXISTS (
      SELECT 1 FROM portalq.order_steps p JOIN portalq.job_queue pq ON pq.id = p.job_id
      WHERE p.order_id = s.order_id AND p.step = ANY(s.after) AND pq.status <> 'completed')
ORDER BY s.order_id, s.job_id
LIMIT %(limit)s
FOR UPDATE OF s, q SKIP LOCKED;

-- name: order_step_results
SELECT p.order_id, p.step, p.job_id, pq.result
FROM portalq.order_steps p JOIN portalq.job_queue pq ON pq.id = p.job_id
WHERE p.order_id = ANY(%(orders)s::text[]) AND pq.status = 'completed';

-- name: order_release_step
WITH upd AS (
    UPDATE portalq.job_queue
    SET status = 'pending', run_at = %(now)s, payload = %(payload)s::jsonb, portal = %(portal)s,
        rate_key = %(rate_key)s, secret_key_id = %(secret_key_id)s,
        secret_dek = %(secret_dek)s, secret_data = %(secret_data)s, last_error = NULL,
        updated_at = %(now)s
    WHERE id = %(id)s AND status = 'deferred' AND run_at = %(held)s
    RETURNING id, attempts
), st AS (
    UPDATE portalq.order_steps SET held = false WHERE job_id IN (SELECT id FROM upd)
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, detail)
    SELECT id, %(now)s, attempts, 'deferred', 'pending',
           '{"event": "order step released: the steps before it completed"}'::jsonb FROM upd
)
SELECT id FROM upd;

-- name: order_step_unbuildable
-- A released step whose payload cannot be built from the results: failed, for a person.
WITH upd AS (
    UPDATE portalq.job_queue
    SET status = 'failed', last_error = %(error)s, finished_at = %(now)s, updated_at = %(now)s
    WHERE id = %(id)s AND status = 'deferred' AND run_at = %(held)s
    RETURNING id, attempts
), st AS (
    UPDATE portalq.order_steps SET held = false WHERE job_id IN (SELECT id FROM upd)
), esc AS (
    INSERT INTO portalq.escalations (job_id, attempt, kind, reason, created_at, next_try_at)
    SELECT id, attempts, 'business', %(error)s, %(now)s, %(now)s FROM upd
    ON CONFLICT ON CONSTRAINT escalations_once DO NOTHING
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, error)
    SELECT id, %(now)s, attempts, 'deferred', 'failed', %(error)s FROM upd
)
SELECT id FROM upd;

-- name: order_erase_input
-- Crypto-shredding: an order's sealed input goes once no step waits for it.
UPDATE portalq.orders o
SET input_key_id = NULL, input_data = NULL, input_erased_at = %(now)s
WHERE o.order_id = ANY(%(orders)s::text[]) AND o.input_data IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM portalq.order_steps s WHERE s.order_id = o.order_id AND s.held);

-- name: order_cancel
-- Cancel an order: its jobs that have not run (pending, deferred, held) are cancelled;
-- a running job runs on (it may be filing), a failed one stays for a person to decide, and
-- a waiting one whose submission reached the portal or may have (its checkpoint's
-- submission record says submitting or confirmed: a registry deciding it later) is left to
-- finish -- cancelling it would only lose track of a filing.
WITH o AS (
    UPDATE portalq.orders
    SET cancelled_at = %(now)s, cancel_reason = %(reason)s, input_key_id = NULL,
        input_data = NULL,
        input_erased_at = CASE WHEN input_data IS NULL THEN input_erased_at ELSE %(now)s END
    WHERE order_id = %(order_id)s AND cancelled_at IS NULL
    RETURNING order_id
), todo AS (
    SELECT q.id, q.status FROM portalq.job_queue q
    JOIN portalq.order_steps s ON s.job_id = q.id
    WHERE s.order_id IN (SELECT order_id FROM o) AND q.status IN ('pending', 'deferred')
      AND NOT (jsonb_typeof(q.checkpoint -> 'submissions') = 'object' AND EXISTS (
          SELECT 1 FROM jsonb_each(q.checkpoint -> 'submissions') r
          WHERE r.value ->> 'state' IN ('submitting', 'confirmed')))
    FOR UPDATE OF q
), upd AS (
    UPDATE portalq.job_queue q
    SET status = 'cancelled', finished_at = %(now)s, updated_at = %(now)s,
        last_error = %(error)s, secret_key_id = NULL, secret_dek = NULL, secret_data = NULL,
        secrets_erased_at = CASE WHEN q.secret_data IS NULL THEN q.secrets_erased_at
                                 ELSE %(now)s END
    FROM todo WHERE q.id = todo.id
    RETURNING q.id, q.attempts, todo.status AS from_status
), st AS (
    UPDATE portalq.order_steps SET held = false
    WHERE order_id IN (SELECT order_id FROM o) AND held
), ev AS (
    INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, worker, detail)
    SELECT id, %(now)s, attempts, from_status, 'cancelled', %(actor)s,
           jsonb_build_object('event', 'order cancelled') FROM upd
)
SELECT (SELECT count(*) FROM o)::int AS found, array(SELECT id FROM upd ORDER BY id) AS cancelled;

-- name: order_get
SELECT order_id, kind, created_at, cancelled_at, cancel_reason, input_erased_at
FROM portalq.orders WHERE order_id = %(order_id)s;

-- name: orders_list
-- The console's orders list: each order with its steps' states and the steps that failed
-- (its held steps wait on them: the order is blocked), blocked ones first, then those in
-- %(at_risk)s (the estimator's deadline warnings), then those with a step still to do,
-- newest first.
SELECT o.order_id, o.kind, o.created_at, o.cancelled_at, count(*)::int AS steps,
       count(*) FILTER (WHERE q.status = 'completed')::int AS completed,
       count(*) FILTER (WHERE s.held AND q.status = 'deferred')::int AS held,
       coalesce(array_agg(s.step ORDER BY s.job_id) FILTER (WHERE q.status = 'failed'),
                '{}') AS failed_steps,
       bool_or(q.status IS NULL OR q.status NOT IN ('completed', 'cancelled')) AS open,
       max(q.finished_at) AS finished_at
FROM portalq.orders o JOIN portalq.order_steps s ON s.order_id = o.order_id
LEFT JOIN portalq.job_queue q ON q.id = s.job_id
GROUP BY o.order_id
ORDER BY (o.cancelled_at IS NULL AND bool_or(q.status = 'failed')) DESC,
         (o.order_id = ANY(%(at_risk)s::text[])) DESC,
         bool_or(q.status IS NULL OR q.status NOT IN ('completed', 'cancelled')) DESC,
         o.created_at DESC, o.order_id
LIMIT %(limit)s;

-- name: order_steps_of
SELECT s.step, s.job_id, s.after, s.held, q.job_type, q.status, q.portal, q.last_error
FROM portalq.order_steps s LEFT JOIN portalq.job_queue q ON q.id = s.job_id
WHERE s.order_id = %(order_id)s ORDER BY s.job_id;

-- name: sealed_order_inputs
-- Rotation: orders whose sealed input is wrapped by another KEK (by order id).
SELECT order_id, input_key_id AS key_id, input_data AS data FROM portalq.orders
WHERE order_id > %(after)s AND input_key_id IS NOT NULL AND input_key_id <> %(current)s
ORDER BY order_id LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: rewrap_order_inputs
UPDATE portalq.orders o SET input_key_id = n.key_id, input_data = n.data
FROM unnest(%(ids)s::text[], %(old)s::text[], %(key_ids)s::text[], %(datas)s::bytea[])
     AS n(id, old, key_id, data)
WHERE o.order_id = n.id AND o.input_key_id = n.old;

-- name: eta_waiting
-- Every job that has not started (issue 41, ETAs): pending, deferred (scheduled, waiting
-- on a portal, or an order's held step) with its order step. Read by the claim index's
-- partial range (status IN ('pending','deferred')).
SELECT q.id, q.job_type, q.order_id, q.portal, q.status, q.priority, q.run_at, q.rate_key,
       q.attempts, q.checkpoint->'waiting' AS waiting, s.step, s.held, s.after
FROM portalq.job_queue q LEFT JOIN portalq.order_steps s ON s.job_id = q.id
WHERE q.status IN ('pending', 'deferred');

-- name: eta_running
SELECT id, job_type, portal, started_at FROM portalq.job_queue WHERE status = 'running';

-- name: eta_held_orders
-- The steps of orders that still hold one: which job each step is, and when it completed.
SELECT s.order_id, s.step, s.job_id, q.status, q.finished_at, o.kind, o.created_at
FROM portalq.order_steps s JOIN portalq.orders o ON o.order_id = s.order_id
LEFT JOIN portalq.job_queue q ON q.id = s.job_id
WHERE s.order_id IN (SELECT h.order_id FROM portalq.order_steps h WHERE h.held);

-- name: eta_durations
-- Run durations per (job type, portal) from the last %(limit)s completions since
-- %(since)s (the job_queue_finished index, newest first: bounded however long the history).
SELECT job_type, portal, count(*) AS n,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY secs) AS p50,
       percentile_cont(0.9) WITHIN GROUP (ORDER BY secs) AS p90
FROM (SELECT job_type, portal, extract(epoch FROM finished_at - started_at) AS secs
      FROM portalq.job_queue
      WHERE status = 'completed' AND finished_at >= %(since)s AND started_at IS NOT NULL AND finished_at >= started_at
      ORDER BY finished_at DESC LIMIT %(limit)s) r
GROUP BY job_type, portal;

-- name: eta_decisions
-- The registries' decisions recorded (waiting.decided) in the newest %(limit)s ended jobs
-- that recorded one since %(since)s -- completed, or failed or cancelled after a refusal (a
-- decision too) -- per decision its portal, submission and seconds from the submission to
-- the decision, made between the last check that saw nothing and the one that saw it
-- (their midpoint is taken). One bounded read of job_queue_decided, so jobs ending without
-- a decision (deliveries, checks) never crowd the decisions out.
SELECT d.value->>'portal' AS portal, d.key AS submission, x.secs
FROM (SELECT checkpoint->'decided' AS decided FROM portalq.job_queue
      WHERE status IN ('completed', 'cancelled', 'failed') AND checkpoint ? 'decided'
        AND finished_at >= %(since)s
      ORDER BY finished_at DESC LIMIT %(limit)s) r
CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(r.decided) = 'object' THEN r.decided
                                   ELSE '{}'::jsonb END) d
CROSS JOIN LATERAL (SELECT extract(epoch FROM
        (d.value->>'last_check')::timestamptz
        + ((d.value->>'seen')::timestamptz - (d.value->>'last_check')::timestamptz) / 2
        - (d.value->>'since')::timestamptz)::float8 AS secs) x
WHERE d.value ?& array['portal', 'since', 'last_check', 'seen'] AND x.secs >= 0;

-- name: eta_rate_used
-- Per (portal, rate key): the jobs started on the portal's current day (its start given
-- per portal), as rate_defer_over counts them.
SELECT q.portal, q.rate_key, count(*) AS n
FROM unnest(%(portals)s::text[], %(day_starts)s::timestamptz[]) AS p(portal, day_start)
JOIN portalq.job_queue q ON q.portal = p.portal AND q.rate_key IS NOT NULL
     AND q.started_at >= p.day_start
GROUP BY q.portal, q.rate_key;

-- name: eta_order
-- One order's steps with their jobs (orders show's ETA).
SELECT s.order_id, s.step, s.job_id, q.status, q.finished_at, o.kind, o.created_at
FROM portalq.order_steps s JOIN portalq.orders o ON o.order_id = s.order_id
LEFT JOIN portalq.job_queue q ON q.id = s.job_id
WHERE s.order_id = %(order_id)s ORDER BY s.job_id;
