"""Test hosts on a real network: network namespaces made by the test (``ip netns``), each
joined to this host by veth pairs, one link per network, on addresses the test assigns.
Traffic never leaves the machine. A link can be cut (``partition``) and restored (``heal``):
the namespace then cannot reach that network, while its other links still work — e.g. a
node that loses the database but still reaches the portals.

    with NetNs("pq1", links={"db": "10.231.0", "portals": "10.232.0"}) as ns:
        ns.host_ip("db")        # 10.231.0.1: bind the server there
        ns.cmd(["python", ...]) # argv prefix to run a program inside the namespace
        ns.partition("db"); ns.heal("db")
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping


def available() -> str | None:
    """Why namespaces cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    return None


class NetNs:
    def __init__(self, name: str, links: Mapping[str, str]) -> None:
        self.name = name
        self.links = dict(links)   # link name -> /24 prefix, e.g. "10.231.0"

    def _ip(self, *args: str, ns: bool = False) -> None:
        argv = ["ip", "netns", "exec", self.name, "ip", *args] if ns else ["ip", *args]
        subprocess.run(argv, check=True, capture_output=True, text=True)

    def _dev(self, link: str, side: str) -> str:
        return f"{self.name[:6]}{link[:4]}{side}"   # interface names: at most 15 bytes

    def host_ip(self, link: str) -> str:
        return f"{self.links[link]}.1"

    def ns_ip(self, link: str) -> str:
        return f"{self.links[link]}.2"

    def __enter__(self) -> NetNs:
        self.close()   # leftovers of an interrupted run
        subprocess.run(["ip", "netns", "add", self.name], check=True, capture_output=True)
        self._ip("link", "set", "lo", "up", ns=True)
        for link, prefix in self.links.items():
            host, inner = self._dev(link, "h"), self._dev(link, "n")
            self._ip("link", "add", host, "type", "veth", "peer", "name", inner)
            self._ip("link", "set", inner, "netns", self.name)
            self._ip("addr", "add", f"{prefix}.1/24", "dev", host)
            self._ip("link", "set", host, "up")
            self._ip("addr", "add", f"{prefix}.2/24", "dev", inner, ns=True)
            self._ip("link", "set", inner, "up", ns=True)
        return self

    def cmd(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def partition(self, link: str) -> None:
        """Packets on ``link`` are dropped from now on (no reset: a real partition)."""
        self._ip("link", "set", self._dev(link, "h"), "down")

    def heal(self, link: str) -> None:
        self._ip("link", "set", self._dev(link, "h"), "up")

    def close(self) -> None:
        for link in self.links:
            subprocess.run(["ip", "link", "del", self._dev(link, "h")], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    def __exit__(self, *exc: object) -> None:
        self.close()
