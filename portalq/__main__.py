"""``python -m portalq``: the ``portalq`` command."""

from portalq.scheduler.cli import main

main()
