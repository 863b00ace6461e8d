"""The portals: their calendars, flows, stand-ins and the flow toolkit."""

# setup.py maps this folder into portalq; from a checkout's root it is also reachable as a
# bare `portals`, which would load a second copy of every module (two clocks, two registries)
if __name__ != "portalq.portals":
    raise ImportError(f"{__name__} is the package portalq.portals: import portalq.portals")
