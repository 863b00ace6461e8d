"""Node roles: a ``portalq run`` limited to chosen portals and job types
(``PORTALQ_PORTALS`` / ``PORTALQ_JOB_TYPES``, ``--portals`` / ``--job-types``), so that
browser-heavy portals, light deliveries or one region's portals run on the machines meant
for them. Claims honour it (only the role's portals are offered to the claim, and the
claim statement filters by job type); the leader's shared duties (deferral, rescue,
escalations) still cover every portal, whatever the leader's own role."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from portalq.jobs import types, worker_api
from portalq.jobs.errors import InputError


def split(value: str) -> tuple[str, ...]:
    """``"a, b,,c"`` -> ``("a", "b", "c")`` (order kept, duplicates dropped)."""
    return tuple(dict.fromkeys(p.strip() for p in value.split(",") if p.strip()))


class Role:
    def __init__(self, portals: Sequence[str] = (), job_types: Sequence[str] = ()) -> None:
        self.portals = frozenset(portals)
        self.job_types = tuple(sorted(job_types))

    @classmethod
    def of(cls, settings: Any) -> Role:
        return cls(split(settings.portals), split(settings.job_types))

    @property
    def unrestricted(self) -> bool:
        return not self.portals and not self.job_types

    def describe(self) -> str:
        if self.unrestricted:
            return "all portals, all job types"
        return (f"portals={','.join(sorted(self.portals)) or 'all'} "
                f"job_types={','.join(self.job_types) or 'all'}")

    def check(self, known_portals: Iterable[str]) -> None:
        """Refuse names that do not exist (one line: a typo would silently idle a node).
        Job types are checked against the registry, so after the plugins are loaded."""
        unknown = sorted(self.portals - set(known_portals))
        if unknown:
            raise InputError(f"unknown portal {unknown[0]!r} in the node's portals "
                             f"(known: {', '.join(sorted(known_portals))})")
        registered = set(types.names())
        bad = [t for t in self.job_types if t not in registered]
        if bad:
            raise InputError(f"unknown job type {bad[0]!r} in the node's job types "
                             f"(known: {', '.join(sorted(registered))})")

    def restrict(self, capacities: list[worker_api.Capacity]) -> list[worker_api.Capacity]:
        """The capacities this node may claim from: its portals, its job types."""
        if self.unrestricted:
            return capacities
        out = [c for c in capacities if not self.portals or c.portal in self.portals]
        if self.job_types:
            out = [dataclasses.replace(c, job_types=self.job_types) for c in out]
        return out
