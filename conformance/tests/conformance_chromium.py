"""Headless Chromium for the tests: load a page and evaluate JavaScript on the rendered page.

Starts Debian's ``chromium`` with ``--headless`` and ``--remote-debugging-port=0``: it picks
a free loopback port itself and writes it (first line) and the browser's DevTools path
(second line) to ``DevToolsActivePort`` in its ``--user-data-dir``, so no port is guessed.
The page target is found with ``GET /json/list`` and driven over the Chrome DevTools
Protocol (``Page.navigate``, ``Runtime.evaluate``) on a WebSocket (RFC 6455) written here
with the standard library; no Origin header is sent, so no ``--remote-allow-origins`` is
needed. The browser runs under :class:`powerplane.testing.Subprocess` and is stopped by
that handle (its process group: renderers and zygotes go too). ``--no-sandbox`` because
Chromium refuses to start as root without it (CI containers run as root); the pages it
loads are the tests' own files. HOME and the XDG directories point into the work
directory, so the crash-report database and caches are left nowhere else.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import struct
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from powerplane.testing import Subprocess, wait_ready

__all__ = ["Chromium", "ChromiumError", "DevToolsPage", "chromium_path", "need_chromium"]

BINARY = "chromium"
"""Debian's package and command name (``.ci/run`` installs it)."""

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3
_OP_CONT, _OP_TEXT, _OP_CLOSE, _OP_PING, _OP_PONG = 0x0, 0x1, 0x8, 0x9, 0xA


class ChromiumError(RuntimeError):
    """The browser or the DevTools protocol did not do what was asked."""


def chromium_path() -> str | None:
    """The ``chromium`` command on PATH, or None."""
    return shutil.which(BINARY)


def need_chromium(found: str | None, env: Mapping[str, str]) -> str:
    """``found`` if there is a browser; else skip the test, or fail it when ``CI`` is set
    (CI installs chromium, so its absence there is a broken setup, not a reason to skip)."""
    if found:
        return found
    if env.get("CI"):
        pytest.fail("chromium is not installed but CI is set: .ci/run installs Debian's "
                    "chromium (apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium); under CI this fails")


class DevToolsPage:
    """One page target over a DevTools WebSocket: navigate, evaluate."""

    def __init__(self, ws_url: str, timeout: float) -> None:
        if not ws_url.startswith("ws://"):
            raise ChromiumError(f"not a ws:// DevTools address: {ws_url!r}")
        hostport, _, path = ws_url[len("ws://"):].partition("/")
        host, _, port = hostport.rpartition(":")
        self.timeout = timeout
        self._sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._buf = b""
        self._next_id = 0
        try:
            self._handshake(hostport, "/" + path)
        except BaseException:
            self._sock.close()
            raise

    # --- WebSocket (RFC 6455), client side -------------------------------------------
    def _handshake(self, hostport: str, path: str) -> None:
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET {path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n")
        self._sock.sendall(request.encode())
        while b"\r\n\r\n" not in self._buf:
            self._fill()
        head, self._buf = self._buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if " 101 " not in f"{lines[0]} ":
            raise ChromiumError(f"WebSocket upgrade refused: {lines[0]}")
        headers = {k.strip().lower(): v.strip()
                   for k, _, v in (line.partition(":") for line in lines[1:])}
        want = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != want:
            raise ChromiumError("WebSocket upgrade: wrong Sec-WebSocket-Accept")

    def _fill(self) -> None:
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ChromiumError("the DevTools connection closed")
        self._buf += chunk

    def _take(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        head = bytes([0x80 | opcode])  # FIN, one frame per message
        if n < 126:
            head += bytes([0x80 | n])  # client frames are masked
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self._sock.sendall(head + mask + body)

    def _recv_message(self) -> str:
        parts: list[bytes] = []
        while True:
            b0, b1 = self._take(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._take(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._take(8))
            mask = self._take(4) if b1 & 0x80 else b""
            payload = self._take(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == _OP_PING:
                self._send_frame(_OP_PONG, payload)
                continue
            if opcode == _OP_PONG:
                continue
            if opcode == _OP_CLOSE:
                raise ChromiumError("the browser closed the DevTools connection")
            if opcode not in (_OP_TEXT, _OP_CONT):
                raise ChromiumError(f"unexpected WebSocket opcode {opcode}")
            parts.append(payload)
            if b0 & 0x80:  # FIN
                return b"".join(parts).decode("utf-8")

    # --- DevTools protocol -----------------------------------------------------------
    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command; its ``result`` (events that arrive meanwhile are dropped)."""
        self._next_id += 1
        ident = self._next_id
        self._send_frame(_OP_TEXT, json.dumps(
            {"id": ident, "method": method, "params": params}).encode())
        while True:
            message = json.loads(self._recv_message())
            if message.get("id") != ident:
                continue
            if "error" in message:
                raise ChromiumError(f"{method}: {message['error']}")
            result: dict[str, Any] = message.get("result", {})
            return result

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression on the page (JSON-serialisable)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def load(self, url: str) -> None:
        """Navigate to ``url`` and wait until that document has loaded."""
        result = self.call("Page.navigate", url=url)
        if result.get("errorText"):
            raise ChromiumError(f"navigating to {url}: {result['errorText']}")
        probe = (f"document.readyState === 'complete' && "
                 f"document.location.href === {json.dumps(url)}")
        wait_ready(lambda: self.evaluate(probe) is True, self.timeout, f"the page {url}")

    def close(self) -> None:
        self._sock.close()


class Chromium:
    """A headless Chromium in a work directory of its own, stopped by its handle."""

    def __init__(self, binary: str, work: Path, timeout: float = 30.0) -> None:
        self.work = work
        self.timeout = timeout
        profile = work / "profile"
        home = work / "home"
        for d in (profile, home):
            d.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
               "XDG_CACHE_HOME": str(home / ".cache"), "XDG_DATA_HOME": str(home / ".local")}
        argv = [binary, "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"]
        self.log = work / "chromium.log"
        self._port_file = profile / "DevToolsActivePort"
        self.proc = Subprocess(argv, env=env, log=self.log)
        try:
            wait_ready(self._port_written, timeout, "headless chromium's DevTools port",
                       self.proc)
            self.port = int(self._port_file.read_text().split()[0])
        except BaseException:
            self.proc.stop()
            raise

    def _port_written(self) -> bool:
        try:
            lines = self._port_file.read_text().split()
        except FileNotFoundError:
            return False
        return len(lines) >= 2 and lines[0].isdigit()

    def _targets(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list",
                                    timeout=self.timeout) as reply:
            found: list[dict[str, Any]] = json.loads(reply.read())
        return found

    def page(self) -> DevToolsPage:
        """A connection to the browser's page (the one it opened with about:blank)."""
        deadline = time.monotonic() + self.timeout
        while True:
            pages = [t for t in self._targets() if t.get("type") == "page"
                     and t.get("webSocketDebuggerUrl")]
            if pages:
                return DevToolsPage(str(pages[0]["webSocketDebuggerUrl"]), self.timeout)
            if time.monotonic() > deadline:
                raise ChromiumError(f"no page target within {self.timeout:g} s; "
                                    f"log: {self.proc.log_tail()}")
            time.sleep(0.05)

    def render(self, path: Path, expression: str) -> Any:
        """Load the file ``path`` and return ``expression`` evaluated on the rendered page."""
        page = self.page()
        try:
            page.load(path.resolve().as_uri())
            return page.evaluate(expression)
        finally:
            page.close()

    def stop(self) -> None:
        self.proc.stop()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
