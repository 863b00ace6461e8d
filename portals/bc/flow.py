"""BC Registries flows: ``name_search`` (a Name Request) and ``file_entity`` for BC.

Submissions (jobs/submission.py), in this order: ``name_request`` (the NR's creation,
confirmed with its temporary ``nr_number="NR L123456"`` and ``nr_state="PENDING_PAYMENT"``),
``nr_payment`` (its payment, confirmed with its real ``nr_number="NR 1234567"``,
``nr_state``, ``nr_name``, ``nr_expires_on``; the ``nr_*`` keys are also kept as plain
checkpoints) and ``incorporation`` (confirmed with ``incorporation_number="BC1234567"`` and
``legal_name``; its reference goes in the Folio or Reference Number).

A retry resumes from them: an ``nr_number`` is never requested again (its state is looked
up by number and the applicant's phone and e-mail, as namerequest's manage page does). A
lost answer to the NR's creation cannot be looked up (the number came with it): a person. A
lost answer to its payment is looked up under the temporary number: still there, the
payment was never created and the NR is paid; gone, namex renumbered it when the payment was
created: a person, never a second payment (portals/bc/site.py).
An NR's states each map to one outcome (portals/bc/name_requests.py, ``classify``).

The application opens on its temporary registration (``T`` + 9, kept as the checkpoint
``temporary_number`` before File and Pay). File and Pay leads, as business-create-ui's
Actions.vue does, to PayBC (whose Pay is the submission ``paybc``) or to the business
dashboard; PayBC keeps shorter hours (portals/steps.py): a job that would reach it with
PayBC closed defers to PayBC's opening before it starts (no browser, nothing saved, no
attempt). The business dashboard of the registration is the one lookup: PAID waits for the
registry, COMPLETED gives the BC number, a saved unpaid filing is paid again from there
(never filed again), an application shown not filed was never received.

``file_entity_bc`` chooses the company name this way: ``nr_number`` in the payload → use
it; else an NR an earlier attempt obtained; else ``legal_name`` → request an NR for it
first (applicant: the completing party with the contact email/phone), then incorporate;
neither → a numbered company ("1234567 B.C. Ltd.").

A CONDITIONAL name needs a consent letter: ``name_search`` stops with a BusinessError
naming the NR (a human obtains the consent; a retry re-reads the NR state, no new NR);
``file_entity_bc`` goes ahead only when the payload says ``nr_consent_received: true``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from portalq.jobs import clock
from portalq.jobs.errors import BusinessError, DeferUntil, RetryableError
from portalq.jobs.submission import State, Submission
from portalq.portals import steps
from portalq.portals.bc import name_requests
from portalq.portals.bc.name_requests import WAITING_STATES, Outcome, classify
from portalq.portals.bc.payload import Applicant, NameSearchPayload
from portalq.portals.bc.site import INCORPORATION, NAME_REQUEST, NR_PAYMENT, PORTAL, BcPortal
from portalq.portals.entity.payload import FileEntityPayload
from portalq.portals.flows import wait_on_portal as waiting
from portalq.portals.flows.base import browser_page
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.signin import sign_in_with_account

ENTITY = {"BC_COMPANY": "BC", "CORPORATION": "BC", "ULC": "ULC"}


def _nr(text: Any) -> str:
    digits = re.sub(r"\D", "", str(text or ""))
    return f"NR {digits}" if len(digits) == 7 else ""


def _entity(p: FileEntityPayload | NameSearchPayload) -> str:
    kind = p.entity_type
    if kind not in ENTITY:
        raise BusinessError(f"a {kind} cannot be incorporated in British Columbia")
    return ENTITY[kind]


def usable_nr(nr: Mapping[str, Any], consent: bool) -> dict[str, Any]:
    """The NR if it can name a company, else the BusinessError saying why not."""
    number, state, name = nr["nr_number"], nr["nr_state"], nr.get("nr_name") or ""
    outcome = classify(state)
    if outcome is Outcome.CONDITIONAL and not consent:
        raise BusinessError(f"{number} is CONDITIONAL for {name!r}: consent letter needed; "
                            "a person sends it to BCRegistries@gov.bc.ca and, once it is "
                            "accepted, retries (the NR is re-read, never requested again)")
    if outcome is Outcome.REJECTED:
        words = "; ".join(f"{n}: {r}" for n, d, r in nr.get("nr_decisions") or [] if r)
        raise BusinessError(f"{number} is REJECTED: all names were rejected by the registry"
                            + (f" ({words})" if words else ""))
    if outcome not in (Outcome.APPROVED, Outcome.CONDITIONAL):
        detail = {"EXPIRED": "the reservation expired",
                  "CONSUMED": "it was already used"}.get(state, outcome.value)
        raise BusinessError(f"{number} is {state}: {detail}")
    return dict(nr)


async def name_search(ctx: FlowContext[NameSearchPayload]) -> dict[str, Any]:
    p = ctx.args
    retry = name_requests.plan(p.model_dump(), ctx.checkpoints)
    if retry is not None and retry.new:
        await _retire_nr(ctx)
    elif retry is not None and retry.refused and not retry.same:
        raise BusinessError(f"not requested: {retry.refused}")
    # the same names as a finished NR: it is read again below (never requested again)
    async with browser_page(ctx) as (page, evidence):
        await sign_in_with_account(ctx, page)   # a BCeID, when an account is configured
        nr = await BcPortal(ctx, page, evidence).name_request(
            p.names, ENTITY[p.entity_type], p.applicant)
    await _examined(ctx, nr)
    result = usable_nr(nr, consent=False)
    return {"nr_number": result["nr_number"], "nr_state": result["nr_state"],
            "name": result["nr_name"], "expires_on": result["nr_expires_on"]}


_NS_KEYS = ("nr_number", "nr_state", "nr_name", "nr_expires_on", "nr_decisions",
            "nr_for_names")


async def _retire_nr(ctx: FlowContext[BaseModel]) -> None:
    """The job's NR is finished (rejected, expired...) and the payload names others: keep
    it in ``earlier_nrs`` and forget its submission, so a NEW one is requested under a new
    reference."""
    await _retire(ctx, _NS_KEYS)


async def _retire(ctx: FlowContext[BaseModel], keys: tuple[str, ...]) -> None:
    """Forget the job's NR -- its creation and its payment -- keeping it in
    ``earlier_nrs``, so a new one is created and paid under new references."""
    cp = ctx.checkpoints
    old = ctx.submission(NAME_REQUEST)
    ref = old.earlier.reference if old.earlier else None
    earlier = cp.get("earlier_nrs")
    await ctx.submission(NR_PAYMENT).retire()
    await old.retire(also={**dict.fromkeys(keys), "earlier_nrs": [
        *(earlier if isinstance(earlier, list) else []),
        {**{k: cp.get(k) for k in keys}, "name_request_reference": ref}]})


async def _examined(ctx: FlowContext[BaseModel], nr: Mapping[str, Any]) -> None:
    """Returns once the registry decided the NR; a state still in its queue is a wait
    (NRO_UPDATING included: namex's own temporary state, never a refusal)."""
    if classify(str(nr.get("nr_state"))) is Outcome.WAIT:
        await waiting.undecided(ctx, ctx.submission(NAME_REQUEST),
                                f"examination of {nr['nr_number']} ({nr['nr_state']})")
    await waiting.decided(ctx, ctx.submission(NAME_REQUEST))


_NR_KEYS = ("nr_number", "nr_state", "nr_name", "nr_expires_on", "nr_for_name")


def _nr_for_another_name(p: FileEntityPayload, cp: Mapping[str, Any]) -> bool:
    """The checkpointed NR was requested for a name the (patched) order no longer has."""
    return bool(cp.get("nr_number") and not p.nr_number and p.legal_name
                and cp.get("nr_for_name") and cp["nr_for_name"] != p.legal_name)


def _needs_nr(p: FileEntityPayload, cp: Mapping[str, Any]) -> bool:
    """This attempt requests (or awaits) the job's own NR before it can incorporate."""
    nr_number = _nr(p.nr_number) or _nr(cp.get("nr_number"))
    ours = not _nr(p.nr_number)
    return _nr_for_another_name(p, cp) or bool(
        p.legal_name and ours and (not nr_number or cp.get("nr_state") in WAITING_STATES))


def _gate_payment() -> None:
    """File and Pay leads straight to PayBC: never start towards it when PayBC would be
    closed on arrival (a deferral to its opening, no attempt spent, nothing saved)."""
    steps.gate(PORTAL, "payment", clock.now(), "the incorporation's File and Pay")


async def file_entity_bc(ctx: FlowContext[FileEntityPayload]) -> dict[str, Any]:
    p, cp = ctx.args, ctx.checkpoints
    entity = _entity(p)
    consent = p.nr_consent_received
    incorporation = ctx.submission(INCORPORATION).earlier
    if incorporation is None or incorporation.state not in (State.CONFIRMED,
                                                             State.SUBMITTING):
        if not _needs_nr(p, cp):   # else the NR first; gated again before File and Pay
            _gate_payment()
    async with browser_page(ctx) as (page, evidence):
        await sign_in_with_account(ctx, page)   # a BCeID, when an account is configured
        bc = BcPortal(ctx, page, evidence)
        if _nr_for_another_name(p, cp):
            # an admin patched the name after a rejection: that NR named the old one
            await _retire(ctx, _NR_KEYS)
            cp = ctx.checkpoints
        nr_number = _nr(p.nr_number) or _nr(cp.get("nr_number"))
        sub = ctx.submission(INCORPORATION)
        if sub.confirmation is not None or sub.in_doubt:
            temp = str((sub.confirmation or {}).get("temporary_number")
                       or cp.get("temporary_number") or "")
            if not temp:   # an attempt from before the dashboard was the lookup
                await waiting.not_found_after_lost_answer(ctx, sub)
            await ctx.step("looking the filing up")
            seen = await bc.dashboard(temp)   # read-only
            if seen["status"] in ("DRAFT", "PENDING") and seen["filed"]:
                seen = await _pay_draft(ctx, bc, sub, temp)
            if "incorporation_number" in seen:
                return await bc.finish(sub, seen, nr_number or None, reconciled=True)
            if seen["status"] == "PAID":
                if sub.confirmation is None:   # its answer was lost: the dashboard vouches
                    await sub.confirmed(None, temporary_number=temp, draft=False)
                await waiting.undecided(ctx, sub, _awaiting(seen))
            # nothing filed on the registration: File and Pay never reached the registry
            await sub.refused("the business dashboard shows the application not filed")
            sub = ctx.submission(INCORPORATION)
        ours = not _nr(p.nr_number)   # an NR this job requests (or requested)
        if p.legal_name and ours and (not nr_number or cp.get("nr_state") in WAITING_STATES):
            party = p.completing_party
            applicant = Applicant(name=f"{party.first_name} {party.last_name}",
                                  email=p.contact_email, phone=p.contact_phone)
            await ctx.save_checkpoint(nr_for_name=p.legal_name)
            nr = await bc.name_request([p.legal_name], entity, applicant)
            await _examined(ctx, nr)
            nr_number = usable_nr(nr, consent)["nr_number"]
        _gate_payment()
        filing = await bc.incorporate(p, entity, nr_number, consent, sub)
        if filing.get("draft") or filing["status"] in ("DRAFT", "PENDING"):
            # PayBC failed (or was left): the saved filing is paid later, never refiled
            raise _paybc_unavailable(str(filing["temporary_number"]))
        if "incorporation_number" not in filing:   # a temporary registration: wait
            await waiting.undecided(ctx, sub, _awaiting(filing))
        return await bc.finish(sub, filing, nr_number or None, reconciled=False)


async def _pay_draft(ctx: FlowContext[BaseModel], bc: BcPortal, sub: Submission,
                     temp: str) -> dict[str, Any]:
    """The filing is saved, unpaid (PayBC failed, or its answer never came back): pay it
    from its dashboard within PayBC's hours -- never a second filing."""
    if steps.step_opens(PORTAL, "payment", clock.now()):
        raise _paybc_unavailable(temp)
    seen = await bc.pay_draft(temp)
    if seen["status"] in ("DRAFT", "PENDING"):
        raise _paybc_unavailable(temp)
    await sub.confirmed(None, **{**(sub.confirmation or {}), "temporary_number": temp,
                                 "draft": False, "draft_status": seen["status"]})
    return seen


def _paybc_unavailable(temp: str) -> Exception:
    """PayBC closed: wait for its opening (no attempt spent); failing within its hours: a
    retryable error (attempts and backoff, then a person)."""
    now = clock.now()
    opens = steps.step_opens(PORTAL, "payment", now)
    if opens is not None:
        return DeferUntil(f"{PORTAL}: {temp} is saved as a DRAFT; PayBC is closed, its payment "
                          f"is retried when PayBC opens at {opens:%Y-%m-%d %H:%M} UTC",
                          when=opens)
    return RetryableError(f"{PORTAL}: PayBC could not take the payment of {temp} (saved as a "
                          "DRAFT); the draft's payment is retried, never the filing")


def _awaiting(filing: Mapping[str, Any]) -> str:
    temp = filing.get("temporary_number") or filing.get("incorporation_number") or "?"
    return f"the registry to complete {temp}"
