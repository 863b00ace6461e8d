"""Jobs that wait for a person (issue 16): a flow asks mid-flow -- an e-mailed code, a
CAPTCHA, a yes/no -- and waits, with a deadline, for ``portalq jobs answer ID --code ...``
from any host. The answer goes through the database (sealed at rest, erased once read) and
a NOTIFY; admins are told at once by mail (an escalation of kind ``question``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from portalq.jobs import clock, limits
from portalq.jobs.db import sql
from portalq.jobs.errors import IllegalTransition
from portalq.jobs.secrets import crypto

#: a flow asking three times without an answer is escalated instead of asking again
UNANSWERED_LIMIT = 3
DEFAULT_DEADLINE = timedelta(minutes=10)


async def ask(conn: Any, *, job_id: int, attempt: int, question: str,
              deadline: datetime) -> int:
    """Record the question and tell the admins (one mail per attempt); its id."""
    now = clock.now()
    row = await sql.afetch_one(conn, "question_ask", {
        "job_id": job_id, "attempt": attempt, "question": question[:500], "now": now,
        "deadline": deadline})
    assert row is not None
    await sql.afetch(conn, "insert_escalation", {
        "job_id": job_id, "attempt": attempt, "kind": "question", "now": now,
        "reason": f"waiting for a person until {deadline.isoformat(timespec='seconds')}: "
                  f"{question[:300]} -- answer: portalq jobs answer {job_id} --code ..."})
    return int(row["id"])


async def tell_admins(conn: Any, *, job_id: int, attempt: int, kind: str, reason: str) -> None:
    """An escalation (mailed at once by the outbox) that a job waits for a person."""
    await sql.afetch(conn, "insert_escalation", {
        "job_id": job_id, "attempt": attempt, "kind": kind, "now": clock.now(),
        "reason": reason[:1000]})


async def answer_of(conn: Any, question_id: int) -> str | None:
    """The answer, if given (then erased from the database: it was read)."""
    row = await sql.afetch_one(conn, "question_poll", {"id": question_id})
    if row is None or row["answered_at"] is None or row["answer"] is None:
        return None
    text = crypto.open_blob(row["answer_key_id"], bytes(row["answer"])).decode()
    await sql.afetch(conn, "question_read", {"id": question_id, "now": clock.now()})
    return text


async def unanswered(conn: Any, job_id: int) -> int:
    row = await sql.afetch_one(conn, "questions_unanswered", {"job_id": job_id,
                                                              "now": clock.now()})
    return int(row["n"]) if row else 0


def answer(conn: Any, job_id: int, text: str, *, by: str) -> str:
    """Deliver ``text`` to the job's open question (sync: the CLI). Its question."""
    text = limits.check_identifier(text, "answer", 200)
    with conn.transaction():
        q = sql.fetch_one(conn, "question_open", {"job_id": int(job_id), "now": clock.now()})
        if q is None:
            raise IllegalTransition(f"job {job_id} is not waiting for an answer")
        key_id, blob = crypto.seal_blob(text.encode())
        if sql.fetch_one(conn, "question_answer", {"id": q["id"], "answer": blob,
                                                   "key_id": key_id, "now": clock.now(),
                                                   "by": by}) is None:
            raise IllegalTransition(f"job {job_id}'s question was answered already")
    return str(q["question"])

