"""Retry policy: a pure function of (attempt, error kind) -> decision."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

BASE_S = 30.0
CAP_S = 3600.0


@dataclass(frozen=True)
class Decision:
    action: Literal["retry", "fail"]
    run_at: datetime | None = None
    reason: str = ""


def backoff(attempt: int, *, base: float = BASE_S, cap: float = CAP_S,
            rng: random.Random | None = None) -> timedelta:
    """Exponential backoff with "equal jitter": half fixed, half random, capped.

    attempt 1 -> 15..30 s, 2 -> 30..60 s, 3 -> 60..120 s, ... never above ``cap``.
    """
    ceiling = min(cap, base * 2 ** max(attempt - 1, 0))
    r = (rng or random).random()
    return timedelta(seconds=ceiling / 2 + r * ceiling / 2)


def decide(*, attempt: int, max_attempts: int, kind: Literal["retryable", "permanent"],
           now: datetime, rng: random.Random | None = None, base: float = BASE_S,
           cap: float = CAP_S) -> Decision:
    """What to do after attempt number ``attempt`` (1-based) failed."""
    if kind == "permanent":
        return Decision("fail", reason="permanent")
    if attempt >= max_attempts:
        return Decision("fail", reason="attempts exhausted")
    return Decision("retry", run_at=now + backoff(attempt, base=base, cap=cap, rng=rng))
