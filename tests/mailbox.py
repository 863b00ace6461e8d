"""A real SMTP server (aiosmtpd) that keeps what it receives, for tests."""

from __future__ import annotations

import email
import socket
import threading
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller


class _Handler:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        msg = email.message_from_bytes(envelope.content)
        with self.arrived:
            self.messages.append(msg)
            self.arrived.notify_all()
        return "250 OK"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Mailbox:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.handler = _Handler()
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def start(self) -> Mailbox:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()

    @property
    def messages(self) -> list[Message]:
        with self.handler.lock:
            return list(self.handler.messages)

    def wait_for(self, count: int, timeout: float) -> list[Message]:
        with self.handler.arrived:
            ok = self.handler.arrived.wait_for(lambda: len(self.handler.messages) >= count,
                                               timeout=timeout)
            if not ok:
                raise AssertionError(f"{len(self.handler.messages)} of {count} mails in "
                                     f"{timeout}s")
            return list(self.handler.messages)
