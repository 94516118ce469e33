"""``powerplane._lazy.lazy_exports``: a name is imported on first use, ``dir()`` lists it."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import powerplane
from powerplane._lazy import lazy_exports

PACKAGE = "pp_lazy_probe"


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package whose ``__init__`` exports a name from a module that records its import."""
    root = tmp_path / PACKAGE
    root.mkdir()
    (root / "__init__.py").write_text(textwrap.dedent("""
        from powerplane._lazy import lazy_exports

        __all__ = ["Heavy", "build", "dumps"]
        __getattr__, __dir__ = lazy_exports(__name__, {
            "Heavy": ".heavy",
            "build": ".heavy:make",
            "dumps": "json:dumps",
        })
    """))
    (root / "heavy.py").write_text(textwrap.dedent("""
        import sys
        sys.modules[__name__.rpartition(".")[0]].imported_heavy = True

        class Heavy:
            pass

        def make():
            return Heavy()
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield PACKAGE
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def test_a_name_loads_on_first_use_and_once(probe: str) -> None:
    pkg = importlib.import_module(probe)
    assert f"{probe}.heavy" not in sys.modules
    assert not hasattr(pkg, "imported_heavy")
    heavy = pkg.Heavy
    assert f"{probe}.heavy" in sys.modules
    assert pkg.imported_heavy is True
    assert vars(pkg)["Heavy"] is heavy  # cached: the next access does not call __getattr__
    assert isinstance(pkg.build(), heavy)  # "module:attr" takes another name
    import json

    assert pkg.dumps is json.dumps  # an absolute module


def test_dir_lists_the_exported_names_before_they_load(probe: str) -> None:
    pkg = importlib.import_module(probe)
    names = dir(pkg)
    assert {"Heavy", "build", "dumps", "__all__"} <= set(names)
    assert names == sorted(names)
    assert f"{probe}.heavy" not in sys.modules


def test_an_unknown_name_is_an_attribute_error(probe: str) -> None:
    pkg = importlib.import_module(probe)
    with pytest.raises(AttributeError, match=rf"module '{probe}' has no attribute 'Nope'"):
        _ = pkg.Nope
    assert not hasattr(pkg, "Nope")


@pytest.mark.parametrize("target", ["", ".", ":x", "json:"])
def test_a_malformed_target_is_refused_at_once(target: str) -> None:
    with pytest.raises(ValueError, match="bad target"):
        lazy_exports("somewhere", {"name": target})


@pytest.mark.perf
def test_powerplane_exports_every_name_lazily() -> None:
    code = textwrap.dedent("""
        import sys
        import powerplane
        loaded = sorted(n for n in sys.modules
                        if n.startswith(("powerplane.", "pydantic", "pluggy", "yaml")))
        print(loaded)
        missing = [n for n in powerplane.__all__ if n not in dir(powerplane)]
        print(missing)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()
    assert out == ["['powerplane._lazy', 'powerplane._version']", "[]"], (
        f"perf (import time): import powerplane loads only powerplane._lazy and "
        f"powerplane._version: {out}")
    for name in powerplane.__all__:
        assert getattr(powerplane, name) is not None, name


def test_a_builder_runs_on_first_use_and_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    module = types.ModuleType("pp_lazy_builder_probe")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    calls: list[int] = []

    def build() -> object:
        calls.append(1)
        return object()

    getattr_, dir_ = lazy_exports(module.__name__, {"THING": build})
    module.__getattr__ = getattr_  # type: ignore[attr-defined]
    assert "THING" in dir_() and calls == []
    first = module.THING  # type: ignore[attr-defined]
    assert getattr_("THING") is first and module.THING is first  # type: ignore[attr-defined]
    assert calls == [1]
    with pytest.raises(AttributeError):
        getattr_("OTHER")


@pytest.mark.parametrize("plugin", ["cloud", "ipmi", "kubernetes", "pdu", "redfish", "talos"])
def test_every_plugin_builds_its_constants_through_the_one_helper(plugin: str) -> None:
    module = importlib.import_module(f"powerplane_{plugin}.plugin")
    source = Path(module.__file__ or "").read_text()
    assert "lazy_exports(__name__" in source and "def __getattr__" not in source
    registered = [n for n in module.__all__ if n.isupper() and n != "REGISTERS"]
    assert registered
    for name in registered:
        assert getattr(module, name) is getattr(module, name)
