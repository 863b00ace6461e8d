"""What a running job gets from outside the browser: a portal account, and a person.

:class:`AccountHold` takes one of the portal's accounts for the job (one session per account
across every node), hands the flow its credentials from the secrets provider, pauses the
account the first time the portal refuses it, and gives it back when the job ends.

:class:`Asker` asks a person (an e-mailed code, a CAPTCHA) and waits for
``portalq jobs answer`` until a deadline; without an answer the attempt is refunded (the job
runs again later), and after three unanswered questions the job goes to a human instead.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from portalq.jobs import clock
from portalq.jobs.errors import AccountError, BusinessError, DeferUntil
from portalq.jobs.operations import accounts, questions
from portalq.jobs.secrets import account_secrets
from portalq.portals.flows.context import Credentials, SessionState

if TYPE_CHECKING:
    from portalq.jobs.db.pool import Pool

log = logging.getLogger("portalq.worker")

#: a job whose portal's accounts are all held by other jobs tries again this soon
ACCOUNT_BUSY_RETRY = timedelta(seconds=15)
#: ... and all paused (a person must fix a secret): this late (a resume wakes the workers)
ACCOUNT_PAUSED_RETRY = timedelta(minutes=10)
POLL_SECONDS = 0.5


class AccountHold:
    def __init__(self, pool: Pool, *, holder: str, portal: str, hold_seconds: float,
                 name: str | None = None) -> None:
        self._pool, self.holder, self.portal, self.name = pool, holder, portal, name
        self._hold = timedelta(seconds=hold_seconds + 60)
        self.account: accounts.Account | None = None

    async def take(self) -> HeldAccount | None:
        """The credentials to sign in with; None when the portal has no account configured
        (a portal -- or a stand-in -- without sign-in). Raises DeferUntil (no attempt
        spent) when every account is paused or held by another job."""
        if self.account is None:
            async with self._pool.connection() as conn:
                self.account = await accounts.take(conn, self.portal, self.holder,
                                                   clock.now() + self._hold, name=self.name)
                if self.account is None:
                    usable, total = await accounts.counts(conn, self.portal)
            if self.account is None:
                if total == 0:
                    return None
                if usable == 0:
                    raise DeferUntil(accounts.waiting_for_an_account(self.portal),
                                     when=clock.now() + ACCOUNT_PAUSED_RETRY)
                raise DeferUntil(f"every account of {self.portal} is in use",
                                 when=clock.now() + ACCOUNT_BUSY_RETRY)
        a = self.account
        password = account_secrets.get(a.portal, a.name, "password")
        if password is None:
            raise BusinessError(f"account {a.portal}/{a.name} has no password in the "
                                "secrets provider")
        return HeldAccount(self, Credentials(
            a.username, password, totp_seed=account_secrets.get(a.portal, a.name,
                                                                "totp_seed")))

    async def session(self) -> SessionState | None:
        assert self.account is not None
        async with self._pool.connection() as conn:
            return await accounts.session(conn, self.account, self.holder)

    async def keep_session(self, state: SessionState | None) -> None:
        assert self.account is not None
        async with self._pool.connection() as conn:
            await accounts.keep_session(conn, self.account, self.holder, state)

    async def expires_in(self, days: int) -> None:
        assert self.account is not None
        async with self._pool.connection() as conn:
            await accounts.note_password_expiry(conn, self.account, days)

    async def refused(self, exc: AccountError) -> None:
        """The portal refused or locked the account: paused, so no other job tries it."""
        if self.account is None:
            return
        async with self._pool.connection() as conn:
            first = await accounts.paused_by_portal(conn, self.account, str(exc)[:300])
        log.error("account %s/%s paused: %s%s", self.account.portal, self.account.name,
                  type(exc).__name__, "" if first else " (paused already)")

    async def release(self) -> None:
        if self.account is None:
            return
        account, self.account = self.account, None
        async with self._pool.connection() as conn:
            await accounts.release(conn, account, self.holder)


class HeldAccount:
    """What a flow gets from ``ctx.account()``: the credentials, and the account's kept
    browser session (sealed at rest; reused by the next job, dropped when it ended)."""

    def __init__(self, hold: AccountHold, credentials: Credentials) -> None:
        self._hold, self.credentials = hold, credentials

    async def session(self) -> SessionState | None:
        return await self._hold.session()

    async def keep_session(self, state: SessionState) -> None:
        await self._hold.keep_session(state)

    async def drop_session(self) -> None:
        await self._hold.keep_session(None)

    async def password_expires_in(self, days: int) -> None:
        """The portal warned the password expires: admins are told days ahead."""
        await self._hold.expires_in(days)


class Asker:
    def __init__(self, pool: Pool, *, job_id: int, attempt: int) -> None:
        self._pool, self.job_id, self.attempt = pool, job_id, attempt

    async def ask(self, question: str, deadline: timedelta = questions.DEFAULT_DEADLINE,
                  ) -> str:
        """Ask, wait for the answer; DeferUntil (attempt refunded) when it does not come in
        time, BusinessError after three questions that went unanswered."""
        until = clock.now() + deadline
        async with self._pool.connection() as conn:
            if await questions.unanswered(conn, self.job_id) >= questions.UNANSWERED_LIMIT:
                raise BusinessError(f"{questions.UNANSWERED_LIMIT} questions to a person "
                                    "went unanswered; a person must take this job over")
            qid = await questions.ask(conn, job_id=self.job_id, attempt=self.attempt,
                                      question=question, deadline=until)
        while clock.now() < until:
            async with self._pool.connection() as conn:
                answer = await questions.answer_of(conn, qid)
            if answer is not None:
                return answer
            await asyncio.sleep(POLL_SECONDS)
        raise DeferUntil(f"no answer to {question[:80]!r} in time",
                         when=clock.now() + timedelta(minutes=1))
