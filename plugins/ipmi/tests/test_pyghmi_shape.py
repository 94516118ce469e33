"""The shape of pyghmi that the ``ipmi`` channel relies on (``powerplane_ipmi.channel``).

pyghmi's public client (``pyghmi.ipmi.command.Command``) takes no cipher suite, no bound on
a login, no logon callback driven by the caller's own loop and no way to refuse IPMI 1.5, so
the channel subclasses the RMCP+ session, ``pyghmi.ipmi.private.session.Session``, and
reads and sets attributes of it (the module docstring of ``channel.py`` says which and why).
``pyproject.toml`` pins ``pyghmi>=1.6.19,<1.7``; these tests fail on a pyghmi whose shape
differs, naming what moved, and the channel's tests against ``ipmi_sim`` and pyghmi's own
BMC simulator prove the names still behave.
"""

from __future__ import annotations

import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path

from pyghmi.ipmi.private import constants, session

from powerplane_ipmi.session import WAKE_SLICE_S, session_class, slice_waits

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _params(fn: object) -> list[str]:
    return list(inspect.signature(fn).parameters)  # type: ignore[arg-type]


def test_pyghmi_is_pinned_and_the_installed_pyghmi_is_in_the_range() -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    assert "pyghmi>=1.6.19,<1.7" in dependencies
    parts = [int(p) for p in version("pyghmi").split(".")[:3]]
    assert parts[:2] == [1, 6] and parts[2] >= 19


def test_the_module_wait_the_channel_slices_takes_timeout_myaddr_evq() -> None:
    """The switch on (the default) replaces ``session._io_wait`` with a slicing wrapper."""
    session_class(None, False)  # applies the slicing once, as the channel does
    assert session._powerplane_bounded is True
    wrapped = session._io_wait
    assert _params(wrapped) == ["timeout", "myaddr", "evq"]
    assert WAKE_SLICE_S < 0.5  # below pyghmi's shortest retry wait


def test_the_one_switch_restores_pyghmi_s_own_wait_and_slices_it_again() -> None:
    """``slice_waits(False)`` gives pyghmi its own ``_io_wait`` back for the whole process;
    ``slice_waits(True)`` slices it again; a session class made meanwhile follows it."""
    session_class(None, False)
    sliced = session._io_wait
    try:
        slice_waits(False)
        assert session._io_wait is session._powerplane_original_io_wait
        assert session._io_wait is not sliced
        session_class(3, False)  # a session class made with the switch off leaves it off
        assert session._io_wait is session._powerplane_original_io_wait
    finally:
        slice_waits(True)
    assert session._powerplane_bounded is True
    assert session._io_wait is not session._powerplane_original_io_wait


def test_the_session_methods_the_channel_overrides_or_calls_exist_with_their_arguments(
) -> None:
    cls = session.Session
    assert {"bmc", "userid", "password", "port", "kg", "onlogon", "privlevel",
            "keepalive"} <= set(_params(cls.__init__))
    assert _params(cls._open_rmcpplus_request) == ["self"]
    assert _params(cls._get_session_challenge) == ["self"]
    assert _params(cls._got_rakp2) == ["self", "data"]
    assert {"payload", "payload_type", "retry"} <= set(_params(cls.send_payload))
    assert {"netfn", "command", "data"} <= set(_params(cls.raw_command))
    assert "timeout" in _params(cls.wait_for_rsp)
    assert callable(cls.logout)
    assert _params(cls.onlogon) == ["self", "parameter"]  # called with {"error": ...}
    assert isinstance(cls.initting_sessions, dict)
    assert "rakp3" in constants.payload_types


def test_the_session_attributes_the_channel_reads_and_sets_are_the_sessions_own() -> None:
    """Instance attributes: pyghmi assigns each of them itself (so a rename would leave the
    channel setting a name nothing reads)."""
    source = inspect.getsource(session.Session)
    for name in ("attemptedhash", "sessioncontext", "rmcptag", "pendingsessionid", "logged",
                 "timeout", "maxtimeout", "logontries", "currhashlen", "sessionid"):
        assert f"self.{name} =" in source, name
    for state in ("OPENSESSION", "EXPECTINGRAKP2", "EXPECTINGRAKP4", "ESTABLISHED", "FAILED"):
        assert f"'{state}'" in source, state


def test_a_pinned_session_class_is_a_pyghmi_session_with_the_overrides() -> None:
    pinned = session_class(17, False)
    assert issubclass(pinned, session.Session)
    own = {name for name in vars(pinned) if not name.startswith("__")}
    assert own == {"_open_rmcpplus_request", "_got_rakp2", "_get_session_challenge"}
