"""The drawing in ``powerplane.errors`` is the whole error tree of every installed distribution.

The test imports every module of ``powerplane`` and of each ``powerplane_*`` package
(pkgutil), walks ``PowerplaneError.__subclasses__()`` recursively and compares each class
with the drawing: drawn, under its own base, with its own exit code; nothing drawn that
does not exist.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import re
from dataclasses import dataclass

import pytest

import powerplane.errors as errors
from powerplane.errors import LifecycleError, PowerplaneError

FAMILY = re.compile(r"^powerplane(_\w+)?$")
LINE = re.compile(
    r"^    (?P<prefix>(?:[│ ]   )*(?:[├└]── )?)(?P<name>[A-Za-z_]\w*)\s+(?P<code>\d)\s"
)


@dataclass(frozen=True)
class Drawn:
    """One class in the drawing: its parent in the drawing and its exit code."""

    parent: str | None
    exit_code: int


def drawing(doc: str) -> dict[str, Drawn]:
    """Parse the tree drawing: name -> parent (by indentation) and exit code."""
    out: dict[str, Drawn] = {}
    stack: list[str] = []
    for line in doc.splitlines():
        m = LINE.match(line)
        if m is None:
            continue
        depth = len(m["prefix"]) // 4
        del stack[depth:]
        out[m["name"]] = Drawn(stack[-1] if stack else None, int(m["code"]))
        stack.append(m["name"])
    return out


def import_everything() -> list[str]:
    """Import every module of every installed family package; the ones that failed."""
    failed = []
    tops = sorted(t for t in importlib.metadata.packages_distributions() if FAMILY.match(t))
    for top in tops:
        package = importlib.import_module(top)
        for info in pkgutil.walk_packages(package.__path__, f"{top}.",
                                          onerror=lambda name: failed.append(name)):
            if info.name.rpartition(".")[2] == "__main__":
                continue  # running it is what importing it does
            try:
                importlib.import_module(info.name)
            except Exception as exc:
                failed.append(f"{info.name}: {type(exc).__name__}: {exc}")
    return failed


def subclasses(root: type[PowerplaneError]) -> set[type[PowerplaneError]]:
    """Every subclass defined by a family package (not by a test module)."""
    out: set[type[PowerplaneError]] = set()
    todo = [root]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if FAMILY.match(sub.__module__.partition(".")[0]) and sub not in out:
                out.add(sub)
                todo.append(sub)
    return out


def problems(doc: str, classes: set[type[PowerplaneError]]) -> list[str]:
    """What the drawing gets wrong about ``classes`` (and the root)."""
    drawn = drawing(doc)
    out = []
    for cls in sorted({PowerplaneError, *classes}, key=lambda c: c.__name__):
        name = cls.__name__
        where = f"{cls.__module__}.{name}"
        if name not in drawn:
            out.append(f"{where} (exit {cls.exit_code}) is missing from the drawing")
            continue
        bases = [b for b in cls.__bases__ if issubclass(b, PowerplaneError)]
        parent = bases[0].__name__ if bases else None
        if drawn[name].parent != parent:
            out.append(f"{where} is drawn under {drawn[name].parent}, its base is {parent}")
        if drawn[name].exit_code != cls.exit_code:
            out.append(f"{where} is drawn with exit {drawn[name].exit_code}, "
                       f"it has {cls.exit_code}")
    names = {c.__name__ for c in classes} | {"PowerplaneError"}
    out += [f"{name} is drawn but no installed distribution defines it"
            for name in sorted(set(drawn) - names)]
    return out


@pytest.fixture(scope="module")
def every_class() -> set[type[PowerplaneError]]:
    failed = import_everything()
    assert not failed, "modules that do not import:\n" + "\n".join(failed)
    return subclasses(PowerplaneError)


def test_the_drawing_is_the_whole_tree(every_class: set[type[PowerplaneError]]) -> None:
    assert errors.__doc__ is not None
    assert problems(errors.__doc__, every_class) == []


def test_the_walk_reaches_other_distributions(every_class: set[type[PowerplaneError]]) -> None:
    modules = {c.__module__ for c in every_class}
    assert "powerplane.lifecycle.store" in modules  # imported by the walk, not by this test
    assert len(drawing(errors.__doc__ or "")) >= 30


def test_a_class_missing_from_the_drawing_is_found(
    every_class: set[type[PowerplaneError]],
) -> None:
    """A plugin-local error class the drawing lacks fails the check, naming its module."""

    class Wedged(errors.ChannelError):
        """Defined here, so the walk itself (family modules only) never sees it."""

    assert Wedged not in subclasses(PowerplaneError)
    found = problems(errors.__doc__ or "", {*every_class, Wedged})
    assert found == [f"{__name__}.Wedged (exit 1) is missing from the drawing"]


def test_a_wrong_parent_or_exit_code_is_found() -> None:
    doc = ("    PowerplaneError  1  root\n"
           "    ├── ChannelError  2  wrong code\n"
           "    │   └── Unreachable  1  fine\n"
           "    └── NotOffered  3  fine\n"
           "        └── Gone  1  stale\n")
    found = problems(doc, {errors.ChannelError, errors.Unreachable, errors.NotOffered})
    assert found == [
        "powerplane.errors.ChannelError is drawn with exit 2, it has 1",
        "Gone is drawn but no installed distribution defines it",
    ]


def test_the_exit_code_list_names_every_refusal() -> None:
    """``NotSupported -> 3`` (and the other codes) is in the exit-code list."""
    doc = errors.__doc__ or ""
    codes = doc[doc.index("CLI exit codes:"):]
    one, rest = codes.split("; 2 ", 1)
    two, three = rest.split("; 3 ", 1)
    listed = {1: one, 2: two, 3: three}
    for cls in (errors.NotSupported, errors.NotOffered, errors.ConfigError,
                errors.UnknownNode, errors.ChannelError, errors.PluginLoadError):
        assert f"``{cls.__name__}``" in listed[cls.exit_code], cls


def test_lifecycle_errors_are_one_branch() -> None:
    from powerplane.lifecycle.ceremony import CeremonyRequired, MaintenanceRefused
    from powerplane.lifecycle.phases import InvalidTransition
    from powerplane.lifecycle.ports import PortError
    from powerplane.lifecycle.storage import StorageError
    from powerplane.lifecycle.store import AlreadyActive, ConcurrentChange, NotFound, StoreError

    for cls in (CeremonyRequired, MaintenanceRefused, InvalidTransition, PortError,
                StorageError, AlreadyActive, ConcurrentChange, NotFound, StoreError):
        assert issubclass(cls, LifecycleError), cls
    assert not issubclass(InvalidTransition, RuntimeError)


def test_the_stores_conflict_is_a_private_signal() -> None:
    """Optimistic concurrency is retried, never shown: not an error of the tree, no exit code."""
    import powerplane.lifecycle as lifecycle
    from powerplane.lifecycle import store

    assert not issubclass(store._Conflict, PowerplaneError)
    assert "Conflict" not in store.__all__ and "Conflict" not in lifecycle.__all__
    assert store.ConcurrentChange.exit_code == 1  # what retrying that does not settle raises
