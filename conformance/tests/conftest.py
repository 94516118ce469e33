"""Fixtures for the conformance suite's own tests: target files on the simulated channel,
the liar channel types, and a helper that runs the suite and returns results.json."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import conformance_liars
import pytest
import yaml
from conformance_targets import PASSWORD_ENV

from powerplane.testing import registered
from powerplane_conformance.api import RunSummary, run_suite


@pytest.fixture(autouse=True, scope="session")
def _password() -> Iterator[str]:
    """The simulated channels' password, in the environment (never inline in a file)."""
    value = "pp-test-secret-3f9a1c"
    os.environ[PASSWORD_ENV] = value
    yield value
    os.environ.pop(PASSWORD_ENV, None)


@pytest.fixture(scope="session")
def liars() -> Iterator[None]:
    """The liar channel types, registered for the session (in-process runs see them)."""
    with registered(conformance_liars, name="conformance-liars"):
        yield


@pytest.fixture
def write_target(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    def write(data: dict[str, Any]) -> Path:
        path = tmp_path / "target.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return path

    return write


@pytest.fixture
def run(
    write_target: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> Callable[..., RunSummary]:
    """Run the suite in-process on target data; returns the summary (exit code, results)."""

    def go(data: dict[str, Any], **kw: Any) -> RunSummary:
        return run_suite(write_target(data), report=tmp_path / "results.json", **kw)

    return go


@pytest.fixture(scope="session")
def lineproto_peer() -> Iterator[tuple[int, str]]:
    """lineproto_server.py on a free loopback port: (port, password). Stopped by its handle."""
    import sys
    import tempfile

    import conformance_lineproto

    from powerplane.testing import Subprocess, wait_ready

    password = "pp-line-secret-8d2e"
    script = Path(__file__).with_name("lineproto_server.py")
    with tempfile.TemporaryDirectory() as work:
        log = Path(work) / "lineproto.log"  # its first line is the port it listens on
        proc = Subprocess([sys.executable, str(script), "m1=on", "m2=off"], log=log,
                          env={**os.environ, "LINEPROTO_PASSWORD": password})
        try:
            with registered(conformance_lineproto, name="conformance-lineproto"):
                wait_ready(lambda: log.read_text().endswith("\n"), 30,
                           "the line-protocol peer", proc)
                port = int(log.read_text().splitlines()[0])
                yield port, password
        finally:
            proc.stop(5)
