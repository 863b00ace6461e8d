"""The queue: its database, jobs, secrets, operations and the business's side."""

# setup.py maps this folder into portalq; from a checkout's root it is also reachable as a
# bare `jobs`, which would load a second copy of every module (two clocks, two registries)
if __name__ != "portalq.jobs":
    raise ImportError(f"{__name__} is the package portalq.jobs: import portalq.jobs")
