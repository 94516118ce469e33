"""The suite's own rules: every check declares a verb or is common; every assertion is
proven by a check; the pytest plugin stays inert in other projects' runs."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from powerplane.capabilities import Verb
from powerplane_conformance import ASSERTIONS, ConformanceSuite
from powerplane_conformance.assertions import assertion_id
from powerplane_conformance.checks import spec_of

CHECKS = {name: fn for name, fn in inspect.getmembers(ConformanceSuite, inspect.isfunction)
          if name.startswith("test_")}


def test_every_check_declares_a_verb_or_is_common() -> None:
    assert CHECKS
    for name, fn in CHECKS.items():
        spec = spec_of(fn)
        assert spec is not None, f"{name} is not declared with @check"
        has_verb = spec.verb is not None or bool(spec.verbs)
        assert has_verb != spec.common, f"{name}: exactly one of a verb requirement or common"
        if spec.absent:
            assert spec.verbs, f"{name}: a refusal check names the verbs it covers"


def test_every_assertion_is_proven_by_a_check_and_has_text() -> None:
    proven = set()
    for fn in CHECKS.values():
        spec = spec_of(fn)
        assert spec is not None
        for verb in spec.verbs or (spec.verb,):
            proven.add(assertion_id(spec.template, verb if spec.verbs else None))
    assert proven == set(ASSERTIONS)
    for a in ASSERTIONS.values():
        assert a.id.isupper() and a.text.endswith(".") and len(a.text) > 30


def test_state_changing_checks_are_destructive() -> None:
    for name, fn in CHECKS.items():
        spec = spec_of(fn)
        assert spec is not None
        if spec.verb in (Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON) or spec.verbs:
            assert spec.destructive, f"{name} changes power state: it must be destructive"


def test_plugin_is_inert_in_an_unrelated_run(tmp_path: Path) -> None:
    (tmp_path / "test_other.py").write_text("def test_x():\n    assert True\n",
                                            encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    code = pytest.main([str(tmp_path), "-q", "-p", "no:cacheprovider", "-p", "no:asyncio",
                        "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini")])
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pytest.ini", "test_other.py"]


def test_packaged_suite_without_target_is_skipped(tmp_path: Path) -> None:
    from powerplane_conformance import cli_suite

    report = tmp_path / "r.json"
    code = pytest.main([str(Path(cli_suite.__file__)), "-q", "-p", "no:cacheprovider",
                        "-p", "no:asyncio", "--rootdir", str(tmp_path),
                        "--powerplane-report", str(report)])
    assert code == 0
    assert '"pass": 0' in report.read_text(encoding="utf-8")
