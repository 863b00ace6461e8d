"""Webhook endpoints for tests, real HTTP servers on localhost ports: :class:`Receiver`
checks each delivery's Standard Webhooks signature on its own (the HMAC is recomputed here,
not with portalq's code) and records it; :class:`SlowReceiver` takes the request and then
trickles its answer a byte at a time (a receiver that holds the sender)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg

from portalq.jobs import clock
from portalq.jobs.business import webhooks
from portalq.jobs.secrets import crypto
from tests.ports import free_port


def signature_ok(secret: str, headers: Any, body: bytes, now: Any) -> bool:
    """The receiver's own check, from the Standard Webhooks spec."""
    msg_id, ts = headers["webhook-id"], headers["webhook-timestamp"]
    if abs(now.timestamp() - int(ts)) > 300:
        return False                      # too old: a replay
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body,
                                    hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(f"v1,{mac}", s)
               for s in headers["webhook-signature"].split())


class Receiver:
    """An HTTP endpoint on a fixed port that records what it gets (with the monotonic time
    it got it) and answers 204 to a valid signature (400 to an invalid one, 503 to the
    first sight of an id when ``fail_first`` is set). ``stop()``: the port refuses
    connections, as a down app does; ``start()`` again: it is back."""

    def __init__(self, secret: str = "") -> None:
        self.port, self.secret, self.fail_first = free_port(), secret, False
        self.got: list[dict[str, Any]] = []
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["content-length"]))
                valid = signature_ok(receiver.secret, self.headers, body, clock.now())
                seen = any(g["id"] == self.headers["webhook-id"] for g in receiver.got)
                receiver.got.append({"id": self.headers["webhook-id"], "body": body,
                                     "valid": valid, "ts": self.headers["webhook-timestamp"],
                                     "headers": dict(self.headers), "path": self.path,
                                     "at": time.monotonic()})
                code = 400 if not valid else 503 if receiver.fail_first and not seen else 204
                self.send_response(code)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/portalq"

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(g["body"]) for g in self.got]


class SlowReceiver:
    """Reads each request whole, then sends ``HTTP/1.1 200 OK`` one byte every ``every``
    seconds and never finishes the headers: each read of the sender's socket gets a byte
    before any per-read timeout, so only a deadline on the whole attempt ends it."""

    def __init__(self, every: float) -> None:
        self.every, self.port = every, free_port()
        self.requests = 0
        self._sock = socket.create_server(("127.0.0.1", self.port))
        self._closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/slow"

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                self.requests += 1
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10000:
                    if self._closed.wait(self.every):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                return                            # the sender gave up: as it should

    def stop(self) -> None:
        self._closed.set()
        self._sock.close()


def stored_unchecked(dsn: str, url: str, events: list[str]) -> int:
    """A subscription as one added before ``webhooks add`` checked its URL was stored."""
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    key_id, sealed = crypto.seal_blob(secret.encode(), aad=webhooks._aad(url))
    with psycopg.connect(dsn) as c:
        row = c.execute(
            "INSERT INTO portalq.webhook_subscriptions (url, events, key_id, secret, "
            "created_at, created_by) VALUES (%s, %s, %s, %s, %s, 'test') RETURNING id",
            (url, events, key_id, sealed, clock.now())).fetchone()
    assert row is not None
    return int(row[0])
