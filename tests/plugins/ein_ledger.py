"""Test plugin: run ``obtain_ein`` jobs with the ledger handler (no browser), to test the
queue's per-key rate limit in isolation."""

from portalq.scheduler.handlers import register_handler
from tests.plugins.ledger import handler

register_handler("obtain_ein", handler)
