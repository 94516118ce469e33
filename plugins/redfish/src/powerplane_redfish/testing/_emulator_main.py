"""Run the sushy-tools emulator app with two test hooks; ``python -m`` this module.

``python -m powerplane_redfish.testing._emulator_main CONFIG REQUEST_LOG ZERO_DELAY``

- ``REQUEST_LOG``: every request is appended to this file (``METHOD PATH``) *before* it is
  handled, so a client that got its answer can count it at once.
- ``ZERO_DELAY`` (``1``/``0``): with ``1``, the fake driver applies a power change at the next
  GET instead of 1-11 s later (its delay comes from ``random.randint(1, 11)``).

Everything else is the emulator's own app and config (``SUSHY_EMULATOR_*`` keys in CONFIG).
"""

from __future__ import annotations

import ssl
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any


class _ZeroDelay:
    """Stands in for the ``random`` module inside the fake driver: every delay is 0."""

    @staticmethod
    def randint(low: int, high: int) -> int:
        return 0


class _RequestLog:
    """WSGI middleware that records each request before handling it."""

    def __init__(self, app: Callable[..., Iterable[bytes]], path: str) -> None:
        self.app = app
        self.path = path
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        line = f"{environ.get('REQUEST_METHOD')} {environ.get('PATH_INFO')}\n"
        with self.lock, open(self.path, "a", encoding="utf-8") as log:
            log.write(line)
        return self.app(environ, start_response)


def main(argv: list[str]) -> int:
    config, request_log, zero_delay = argv
    from sushy_tools.emulator import main as emulator
    from sushy_tools.emulator.resources.systems import fakedriver

    if zero_delay == "1":
        fakedriver.random = _ZeroDelay
    app = emulator.app
    app.configure(config_file=config)
    app.wsgi_app = _RequestLog(app.wsgi_app, request_log)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(app.config["SUSHY_EMULATOR_SSL_CERT"],
                            app.config["SUSHY_EMULATOR_SSL_KEY"])
    app.run(
        host=app.config["SUSHY_EMULATOR_LISTEN_IP"],
        port=app.config["SUSHY_EMULATOR_LISTEN_PORT"],
        ssl_context=context,
        threaded=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
