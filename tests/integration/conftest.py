"""Fixtures the integration tests share: a real SMTP server (the tests' mailbox) and a real
HTTP webhook receiver, each started per test and stopped after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mailbox import Mailbox
from tests.webhook_receiver import Receiver


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    box = Mailbox().start()
    yield box
    box.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()
