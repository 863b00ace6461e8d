"""The submission protocol: the one record of a job's points of no return.

A flow that is about to press the button that files something says so first, and says what
came back after::

    sub = ctx.submission("incorporation")          # its earlier state, if any
    if sub.in_doubt:                                # an earlier attempt pressed, unconfirmed
        found = await portal.look_up(sub.reference)     # reconcile, never resubmit blindly
        ...
    async with sub:                                 # checkpoint written before the click
        await page.click("File and Pay")
        await sub.confirmed(incorporation_number=number)   # and the confirmation after

It lives in the job's checkpoint under ``"submissions"``: ``{name: {"state", "reference",
"confirmation", "at"}}``. Everything that must know whether a job passed a point of no return
-- the rescuer of crashed jobs, ``jobs retry --not-filed`` / ``--confirmed-filed``, the
console, the status view -- reads only this (:func:`in_doubt`), so no flow's own spelling
decides whether something is filed twice. Confirmation values are stored as they are: never
put secrets there (sealed checkpoint keys are the place for those).

``ctx.step("...")`` is the other thing every flow reports: where it is, for the status view.
"""

from __future__ import annotations

import secrets as _secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import TracebackType
from typing import TYPE_CHECKING, Any

from portalq.jobs import clock

KEY = "submissions"
#: the requests a submission sent, by its reference (portals/flows/never_twice.py): a
#: second identical one is stopped while the submission is in doubt; forgotten when the
#: portal (refused) or an admin (not filed) says nothing was filed
SENT = "sent"
STEP = "step"


class State(StrEnum):
    #: the button was (or is about to be) pressed; nothing came back yet
    SUBMITTING = "submitting"
    #: the portal confirmed it (the confirmation holds what it said)
    CONFIRMED = "confirmed"
    #: the portal refused it: nothing was filed, a later attempt may submit again
    REFUSED = "refused"
    #: an admin checked the portal and found nothing filed (``jobs retry --not-filed``)
    NOT_FILED = "not_filed"


@dataclass(frozen=True)
class Record:
    name: str
    state: State
    reference: str | None = None
    confirmation: Mapping[str, Any] = field(default_factory=dict)
    #: when the record last changed (pressed, confirmed, refused...)
    at: str | None = None
    #: when the button was pressed, kept through the confirmation (``at`` moves with each
    #: change): what a registry's processing time is measured from
    submitted: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": str(self.state), "at": self.at}
        if self.submitted is not None:
            out["submitted"] = self.submitted
        if self.reference is not None:
            out["reference"] = self.reference
        if self.confirmation:
            out["confirmation"] = dict(self.confirmation)
        return out


def records(checkpoint: Mapping[str, Any] | None) -> dict[str, Record]:
    raw = checkpoint.get(KEY) if isinstance(checkpoint, Mapping) else None
    if not isinstance(raw, Mapping):
        return {}
    out = {}
    for name, r in raw.items():
        if isinstance(r, Mapping) and r.get("state") in State._value2member_map_:
            out[str(name)] = Record(str(name), State(r["state"]), r.get("reference"),
                                    dict(r.get("confirmation") or {}), r.get("at"),
                                    r.get("submitted"))
    return out


def in_doubt(checkpoint: Mapping[str, Any] | None) -> list[Record]:
    """Submissions pressed and never confirmed or refused: the points of no return passed."""
    return [r for r in records(checkpoint).values() if r.state is State.SUBMITTING]


def _patch(checkpoint: Mapping[str, Any] | None, *changed: Record) -> dict[str, Any]:
    all_ = {n: r.as_json() for n, r in records(checkpoint).items()}
    all_.update({r.name: r.as_json() for r in changed})
    return {KEY: all_}


def started(checkpoint: Mapping[str, Any] | None, name: str, reference: str,
            now: datetime) -> dict[str, Any]:
    return _patch(checkpoint, Record(name, State.SUBMITTING, reference, {}, now.isoformat(),
                                     now.isoformat()))


def confirmed(checkpoint: Mapping[str, Any] | None, name: str, data: Mapping[str, Any],
              now: datetime, reference: str | None = None) -> dict[str, Any]:
    earlier = records(checkpoint).get(name)
    ref = reference or (earlier.reference if earlier else None)
    return _patch(checkpoint, Record(name, State.CONFIRMED, ref, dict(data), now.isoformat(),
                                     earlier.submitted if earlier else None))


def _unsent(checkpoint: Mapping[str, Any] | None, refs: list[str]) -> dict[str, Any]:
    """The checkpoint patch that forgets the requests sent for ``refs`` (nothing was filed:
    a later attempt may send them again)."""
    sent = checkpoint.get(SENT) if isinstance(checkpoint, Mapping) else None
    if not isinstance(sent, Mapping) or not any(r in sent for r in refs):
        return {}
    return {SENT: {k: v for k, v in sent.items() if k not in refs}}


def refused(checkpoint: Mapping[str, Any] | None, name: str, reason: str,
            now: datetime) -> dict[str, Any]:
    earlier = records(checkpoint).get(name)
    return {**_unsent(checkpoint, [(earlier.reference if earlier else None) or name]),
            **_patch(checkpoint, Record(name, State.REFUSED,
                                        earlier.reference if earlier else None,
                                        {"reason": reason}, now.isoformat(),
                                        earlier.submitted if earlier else None))}


def resolved(checkpoint: Mapping[str, Any] | None, state: State, now: datetime,
             **confirmation: Any) -> dict[str, Any]:
    """An admin's answer for every submission in doubt (NOT_FILED or CONFIRMED)."""
    doubt = in_doubt(checkpoint)
    unsent = (_unsent(checkpoint, [r.reference or r.name for r in doubt])
              if state is State.NOT_FILED else {})
    return {**unsent, **_patch(checkpoint, *(Record(r.name, state, r.reference, confirmation,
                                                    now.isoformat(), r.submitted)
                                             for r in doubt))}


def new_reference(job_id: int, name: str) -> str:
    """A reference unique to this submission, short enough for a portal's "your reference"
    field, that a later attempt can look the filing up by."""
    return f"PQ{job_id}-{name[:3].upper()}-{_secrets.token_hex(3)}"


class Submission:
    """One named submission of a job (see the module docstring)."""

    def __init__(self, name: str, job_id: int, checkpoints: Callable[[], Mapping[str, Any]],
                 save: Callable[..., Awaitable[None]], now: Callable[[], datetime],
                 reference: str | None = None) -> None:
        self.name = name
        self._job_id = job_id
        self._checkpoints, self._save, self._now = checkpoints, save, now
        self.earlier = records(checkpoints()).get(name)
        reusable = self.earlier is not None and self.earlier.state in (State.SUBMITTING,
                                                                      State.CONFIRMED)
        self.reference = reference or (self.earlier.reference if reusable and self.earlier
                                       and self.earlier.reference else
                                       new_reference(job_id, name))
        self._confirmed = False

    @property
    def in_doubt(self) -> bool:
        """An earlier attempt pressed the button and nothing came back."""
        return self.earlier is not None and self.earlier.state is State.SUBMITTING

    @property
    def confirmation(self) -> Mapping[str, Any] | None:
        """What the portal confirmed earlier (None: not confirmed)."""
        if self.earlier is not None and self.earlier.state is State.CONFIRMED:
            return self.earlier.confirmation
        return None

    async def __aenter__(self) -> Submission:
        # durably before the click; the runner refuses it without a fresh lease
        await self._save(**started(self._checkpoints(), self.name, self.reference, self._now()))
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        # leaving without a confirmation keeps the record "submitting": in doubt
        return None

    async def confirmed(self, also: Mapping[str, Any] | None = None, **data: Any) -> None:
        """The portal confirmed it (inside the block, or when reconciling an earlier one).
        ``also``: other checkpoint keys written in the same write (e.g. a sealed link)."""
        await self._save(**(also or {}), **confirmed(self._checkpoints(), self.name, data,
                                                     self._now(), self.reference))
        self.earlier = records(self._checkpoints()).get(self.name)
        self._confirmed = True

    async def retire(self, also: Mapping[str, Any] | None = None) -> Record | None:
        """Forget a confirmed (or refused) submission, so the job may make a new one (e.g.
        a name reserved for a name the order no longer has). One in doubt cannot be
        forgotten: that would hide a point of no return."""
        if self.in_doubt:
            raise RuntimeError(f"submission {self.name!r} is in doubt; it cannot be retired")
        old = self.earlier
        rest = {n: r.as_json() for n, r in records(self._checkpoints()).items()
                if n != self.name}
        await self._save(**(also or {}), **{KEY: rest})
        self.earlier, self.reference = None, new_reference(self._job_id, self.name)
        return old

    async def refused(self, reason: str) -> None:
        """The portal answered no: nothing filed, a later attempt may submit again."""
        await self._save(**refused(self._checkpoints(), self.name, reason, self._now()))
        self.earlier = records(self._checkpoints()).get(self.name)


class Reporting:
    """``submission()`` and ``step()`` for any flow context that has ``job_id``,
    ``checkpoints`` and ``save_checkpoint`` (the service's and the tests' alike)."""

    job_id: int
    save_checkpoint: Callable[..., Awaitable[None]]

    if TYPE_CHECKING:
        @property
        def checkpoints(self) -> Mapping[str, Any]: ...

    def submission(self, name: str, reference: str | None = None) -> Submission:
        return Submission(name, self.job_id, lambda: self.checkpoints, self.save_checkpoint,
                          clock.now, reference)

    async def step(self, text: str) -> None:
        """Where the flow is now ("signing in", "review page"): shown by the status view."""
        if self.checkpoints.get(STEP) != text:
            await self.save_checkpoint(**{STEP: text})


__all__ = ["Reporting", "KEY", "STEP", "Record", "State", "Submission", "confirmed", "in_doubt",
           "new_reference", "records", "refused", "resolved", "started"]
