"""Egress per portal (issue 37): a portal's browser traffic leaves through its own proxy --
a real HTTP proxy (a small forwarding one, in a thread) that asks for credentials and
sees the IRS stand-in's traffic when the real service (`portalq run`) obtains an EIN,
while the other portals' traffic does not go through it. Nothing logs the password."""

from __future__ import annotations

import base64
import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

from portalq.jobs import queue
from tests import payloads
from tests.browser import bckit
from tests.mailbox import Mailbox
from tests.service_helpers import Service, open_all_hours, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

USER, PASSWORD = "egress", "pr0xy-Secret-7"
HOP = {"connection", "keep-alive", "proxy-authorization", "proxy-connection", "te",
       "trailer", "transfer-encoding", "upgrade"}


class Proxy(ThreadingHTTPServer):
    """A forwarding HTTP proxy (absolute-URI requests) with Basic proxy authentication; it
    keeps the URL of every request it forwarded, and counts the refused ones."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[str] = []
        self.refused = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://{USER}@127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Proxy

    def log_message(self, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if self.headers.get("Proxy-Authorization") != want:
            with self.server.lock:
                self.server.refused += 1
            self.send_response(407)
            self.send_header("Proxy-Authenticate", 'Basic realm="egress"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        url = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        upstream = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=60)
        try:
            upstream.request(self.command, url.path + (f"?{url.query}" if url.query else ""),
                             body=body or None, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
        finally:
            upstream.close()
        with self.server.lock:
            self.server.seen.append(self.path)
        self.send_response(answer.status)
        for k, v in answer.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward


def test_a_portals_browser_traffic_goes_through_its_proxy(
        db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    proxy = Proxy()
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    (secrets / "account_irs_ein_proxy_password").write_text(PASSWORD)
    (secrets / "account_irs_ein_proxy_password").chmod(0o600)
    mailbox = Mailbox().start()
    svc = Service(db, tmp_path, "egress", PORTALQ_STANDIN_URL=standin_server.base_url,
                  PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                  PORTALQ_WORKERS=2, PORTALQ_SECRETS_DIR=secrets,
                  PORTALQ_PROXY_IRS_EIN=proxy.url,
                  # Chromium never proxies loopback unless told to (the stand-in is local)
                  PORTALQ_PROXY_IRS_EIN_BYPASS="<-loopback>").start()
    try:
        ein = queue.enqueue("obtain_ein", "ORD-E1", payloads.OBTAIN_EIN).id
        crtc = queue.enqueue("process_crtc", "ORD-E2", bckit.CRTC_PAYLOAD).id
        wait_until(lambda: all(queue.get_job(j)["status"] == "completed" for j in (ein, crtc)),
                   120, "both jobs")
    finally:
        svc.stop()
        mailbox.stop()
        proxy.shutdown()
        proxy.server_close()
    irs = f"{standin_server.base_url}/irs/"
    assert any(u.startswith(irs + "applyein") for u in proxy.seen)          # the app
    assert any(u.startswith(irs + "applyein/api/application") for u in proxy.seen)
    assert all(u.startswith(irs) for u in proxy.seen), proxy.seen          # only the IRS's
    assert proxy.refused >= 1   # it asked for credentials, and the browser gave them
    assert len(portals.ledger("irs_ein")) == 1 and len(portals.ledger("crtc")) == 1
    log = svc.log()
    assert (f"portal irs_ein: browser traffic through proxy http://127.0.0.1:"
            f"{proxy.server_address[1]} (with credentials) bypass <-loopback>") in log
    assert PASSWORD not in log and f"{USER}@" not in log
