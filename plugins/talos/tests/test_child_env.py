"""The talosctl child's environment: only the kept variables, and built safely while another
thread unsets a variable (pytest removes ``PYTEST_CURRENT_TEST`` between tests while the
conformance suite's workers run talosctl)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from powerplane_talos.talosctl_transport import child_env


class _Vanishing(dict[str, str]):
    """An environment in which one variable is unset between being listed and being read."""

    def __iter__(self) -> Iterator[str]:
        keys = list(super().__iter__())
        yield from keys
        yield "PYTEST_CURRENT_TEST"

    def __getitem__(self, key: str) -> str:
        if key == "PYTEST_CURRENT_TEST":
            raise KeyError(key)
        return super().__getitem__(key)

    def items(self):  # type: ignore[override]
        return ((k, self[k]) for k in self)

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default


def test_a_variable_unset_meanwhile_is_left_out_not_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    racy = _Vanishing(PATH="/usr/bin", HOME="/root", LC_ALL="C", SECRET="x")
    monkeypatch.setattr(os, "environ", racy)
    assert child_env(extra=["PYTEST_CURRENT_TEST"]) == {
        "PATH": "/usr/bin", "HOME": "/root", "LC_ALL": "C"}


def test_only_the_kept_variables_reach_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PP_SOME_SECRET", "s3cret")
    monkeypatch.setenv("LC_TIME", "C")
    env = child_env()
    assert "PP_SOME_SECRET" not in env
    assert env.get("LC_TIME") == "C"
    assert env.get("PATH") == os.environ["PATH"]
