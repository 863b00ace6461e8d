"""The schema's migrations (alembic), applied by ``portalq migrate``."""

# setup.py maps this folder into portalq; from a checkout's root it is also reachable as a
# bare `migrations`, which would load a second copy of every module (two clocks, two registries)
if __name__ != "portalq.migrations":
    raise ImportError(f"{__name__} is the package portalq.migrations: import portalq.migrations")
