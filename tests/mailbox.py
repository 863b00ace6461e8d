"""A real SMTP server (aiosmtpd) that keeps what it receives, for tests. A recipient whose
address starts ``refuse@`` is refused (550), as a server refuses an unknown mailbox."""

from __future__ import annotations

import email
import threading
from email import policy
from email.message import EmailMessage, Message
from typing import Any

from aiosmtpd.controller import Controller

from tests.ports import free_port


class _Handler:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.envelopes: list[Any] = []  # aiosmtpd's: the raw content and the recipients
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any,  # noqa: N802
                          address: str, rcpt_options: list[str]) -> str:
        if address.startswith("refuse@"):
            return "550 5.1.1 mailbox unavailable"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        msg = email.message_from_bytes(envelope.content)
        with self.arrived:
            self.messages.append(msg)
            self.envelopes.append(envelope)
            self.arrived.notify_all()
        return "250 OK"


class Mailbox:
    def __init__(self, port: int | None = None) -> None:
        self.host = "127.0.0.1"
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

    @property
    def envelopes(self) -> list[Any]:
        with self.handler.lock:
            return list(self.handler.envelopes)

    def parsed(self, index: int = -1) -> EmailMessage:
        """A received mail parsed with the modern policy (attachments, headers as objects)."""
        with self.handler.lock:
            content = self.handler.envelopes[index].content
        return email.message_from_bytes(content, policy=policy.default)  # type: ignore[return-value]

    def wait_for(self, count: int, timeout: float) -> list[Message]:
        with self.handler.arrived:
            ok = self.handler.arrived.wait_for(lambda: len(self.handler.messages) >= count,
                                               timeout=timeout)
            if not ok:
                raise AssertionError(f"{len(self.handler.messages)} of {count} mails in "
                                     f"{timeout}s")
            return list(self.handler.messages)
