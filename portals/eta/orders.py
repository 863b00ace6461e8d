"""An order's held steps in the replay: released when the steps before them finish, then
claimed in order with their portal's queue (portals/eta/)."""

from __future__ import annotations

from collections.abc import Mapping

from portalq.portals.eta.model import Job, ts
from portalq.portals.eta.replay import NONE, Entry, Levels, Replay, due_order, levels, probe

#: replays of the portals again as order steps are released (an order's depth, and more)
ROUNDS = 8


def release(replay: Replay, queued: Mapping[str, Levels], held: list[Job]) -> None:
    """Replay every portal, the held steps joining their portal's queue when the steps
    before them finish (their run_at is then, as the release sets it), in claim order with
    the jobs queued there: the portals are replayed again with the releases found, until
    none moves (a release depends on replays that may hold released steps themselves). A
    portal whose steps wait for another's jobs is replayed after that one, so that a
    refresh of a long backlog replays each portal about once."""
    now, out = replay.now, replay.out
    done = {**{k: max(ts(v), now) for k, v in replay.snap.done.items()}, **replay.running()}
    released: dict[int, float] = {}
    where = {j.id: j.portal for j in replay.snap.jobs}
    needs: dict[str, set[str]] = {}
    for j in held:
        needs.setdefault(j.portal, set()).update(
            where[a] for a in j.after if a not in done and a in where)
    for code, found in needs.items():
        found.discard(code)
    todo = set(queued) | set(needs)
    for _ in range(ROUNDS + len(replay.snap.portals)):
        ready = {c for c in todo if not needs.get(c, set()) & todo} or set(todo)
        todo -= ready
        for code in ready:
            extra = [(released[j.id], j.id, j) for j in held
                     if j.portal == code and j.id in released]
            if code in replay.slots:
                replay.reset(code)
            replay.queue(code, merged(queued.get(code, []), extra))
        for j in held:
            ends = [done[a] if a in done else (out[a][2] if a in out else None)
                    for a in j.after]
            at = None if None in ends else max(e for e in ends if e is not None)
            if at is not None and released.get(j.id) != at:
                released[j.id] = at
                todo.add(j.portal)
            elif at is None and j.id in released:
                del released[j.id]
                todo.add(j.portal)
        if not todo:
            break
    why = replay.why
    for j in held:
        if j.id not in released or j.id not in out:
            known = all(a in done or a in out for a in j.after)
            out[j.id] = NONE
            why[j.id] = ["held: a step before it has no estimate (failed, escalated or "
                         "paused)" if known else "held: its earlier steps are unknown"]
        else:
            portal = replay.snap.portals.get(j.portal)
            why[j.id] = ["after the order's earlier steps", *probe(portal),
                         *why.get(j.id, ())]


def merged(base: Levels, extra: list[Entry]) -> Levels:
    """The levels ``base`` with the released steps ``extra`` in their places."""
    if not extra:
        return base
    add = levels(extra)
    prios = {lv[0][2].priority: lv for lv in base if lv}
    for lv in add:
        prio = lv[0][2].priority
        found = prios.get(prio)
        if found is not None:   # two sorted runs: timsort merges them in one pass
            lv = [*found, *lv]
            lv.sort(key=due_order)
        prios[prio] = lv
    return [prios[p] for p in sorted(prios, reverse=True)]


__all__ = ["ROUNDS", "merged", "release"]
