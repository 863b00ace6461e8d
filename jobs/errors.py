"""Outcomes a handler can signal, and input errors.

Handlers (the portal flows) raise these; the worker maps each to a queue transition.
They carry no browser or service detail, so both sides can import them.
"""

from __future__ import annotations

from datetime import datetime


class PortalqError(Exception):
    """Base class."""


class InputError(PortalqError, ValueError):
    """Bad input from a user or caller: nothing is written."""


class BatchInputError(InputError):
    """Bad input in one job of a batch (``enqueue_many``): ``index`` is its position
    (0-based), ``detail`` the problem; the message reads "job N: detail"."""

    def __init__(self, index: int, detail: str) -> None:
        super().__init__(f"job {index + 1}: {detail}")
        self.index = index
        self.detail = detail


class KeyError_(PortalqError):
    """A key is missing or does not open a value (wrong key, tampered data)."""


class IllegalTransition(PortalqError):
    """The job is not in a state that allows the requested change."""


class JobNotFound(InputError):
    pass


class HandlerOutcome(PortalqError):
    """Base of the outcomes a handler raises instead of returning a result."""


class RetryableError(HandlerOutcome):
    """A technical failure (timeout, 5xx, "try again later"): retried with backoff."""


class PortalUnavailable(RetryableError):
    """A retryable failure that points at the portal itself (5xx, maintenance, a dropped
    or refused connection, a page that does not load in time): an outage sign for the
    circuit breaker. A flow's own trouble (a control not found, an unexpected page) is a
    plain :class:`RetryableError` and never pauses a portal."""


class PortalChanged(RetryableError):
    """The portal shows a page the flow does not know (a review page other than the
    expected one, no known next state after a click, an unknown sign-in page): the portal
    changed. Nothing irreversible was done on it. The portal's flows are paused (by
    ``drift``) until an operator resumes it; the job waits without spending its attempt,
    and one escalation carries the page's evidence. ``expected`` describes what the flow
    expected (for a review page: its structure, the data left out), ``where`` the step."""

    def __init__(self, message: str, *, expected: str = "", where: str = "") -> None:
        super().__init__(message)
        self.expected = expected
        self.where = where


class BusinessError(HandlerOutcome):
    """A permanent failure (name rejected, not eligible): failed at once and escalated."""


class UncertainOutcome(HandlerOutcome):
    """The portal may or may not have accepted a submission: never retried blindly."""


class PortalClosed(HandlerOutcome):
    """The portal is closed or in maintenance: deferred, no attempt spent.

    ``reopen_at`` is when to try again; ``None`` means "the portal's next opening".
    ``outage`` marks signs of an outage (maintenance page, 5xx) as opposed to a closed
    notice during normal closed hours.
    """

    def __init__(self, message: str = "portal closed", *, reopen_at: datetime | None = None,
                 outage: bool = False) -> None:
        super().__init__(message)
        self.reopen_at = reopen_at
        self.outage = outage


class DeferUntil(HandlerOutcome):
    """Not now, but not a failure either (e.g. IRS one-EIN-per-day limit): run at ``when``."""

    def __init__(self, message: str, *, when: datetime) -> None:
        super().__init__(message)
        self.when = when


class AccountError(BusinessError):
    """A portal account needs a person: failed at once, never retried (retrying a bad
    password locks the business out). ``account`` names it; no secret is ever part of it."""

    def __init__(self, message: str, *, account: str = "") -> None:
        super().__init__(message)
        self.account = account


class AccountRejected(AccountError):
    """The portal refused the account's credentials (wrong user name, password or TOTP seed)."""


class AccountLocked(AccountError):
    """The portal says the account is locked."""


class PasswordChangeRequired(AccountError):
    """The portal will not go on until the account's password is changed."""
