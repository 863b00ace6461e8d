"""The portalq service: CLI, scheduler tick, workers, escalation mail, metrics."""

# setup.py maps this folder into portalq; from a checkout's root it is also reachable as a
# bare `scheduler`, which would load a second copy of every module (two clocks, two registries)
if __name__ != "portalq.scheduler":
    raise ImportError(f"{__name__} is the package portalq.scheduler: import portalq.scheduler")
