"""Why a demo peer could not start: the missing package, and the command that installs it.

A peer's ``start`` raises; the demo names what is missing only where a declared requirement
says so: a ``ModuleNotFoundError`` names the module, matched against the requirements of
the distribution that offered the peer (its ``test`` extra carries the peers); otherwise an
extra's requirement that is not installed is named. Nothing is invented: a module no
requirement declares is named without an install command.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from powerplane.plugins import Registry
    from powerplane.testing import Peer

__all__ = ["install_hint", "peer_distribution"]

_REQ_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_REQ_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _norm(name: str) -> str:
    """A distribution or module name in its normalised form (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(dist: str) -> list[tuple[str, str | None]]:
    """``(name, extra or None)`` for every requirement ``dist`` declares."""
    from importlib import metadata

    try:
        lines = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return []
    out: list[tuple[str, str | None]] = []
    for line in lines:
        name = _REQ_NAME.match(line)
        if name is None:
            continue
        extra = _REQ_EXTRA.search(line)
        out.append((_norm(name.group(1)), extra.group(1) if extra else None))
    return out


def _importable(dist_name: str) -> bool:
    """Whether distribution ``dist_name`` is installed and its top-level modules import."""
    import importlib.util
    from importlib import metadata

    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        return False
    tops: set[str] = set()
    top_level = dist.read_text("top_level.txt")
    if top_level:
        tops = {t.strip() for t in top_level.splitlines() if t.strip()}
    else:
        for f in dist.files or []:
            first = f.parts[0] if f.parts else ""
            if first.endswith((".dist-info", ".egg-info", ".data")) or first in ("..", ""):
                continue
            if first.endswith(".py"):
                tops.add(first[:-3])
            elif len(f.parts) > 1 and f.parts[1] == "__init__.py":
                tops.add(first)
    for top in sorted(tops)[:8]:
        if not top.isidentifier():
            continue
        try:
            if importlib.util.find_spec(top) is None:
                return False
        except (ImportError, ValueError):
            return False
    return True


def _missing_module(exc: BaseException) -> str | None:
    """The top-level module a ``ModuleNotFoundError`` in ``exc``'s chain could not find."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ModuleNotFoundError) and cur.name:
            return cur.name.split(".")[0]
        cur = cur.__cause__ or cur.__context__
    return None


def install_hint(exc: BaseException, dist: str) -> tuple[str, str | None] | None:
    """What is missing for a peer of distribution ``dist`` that raised ``exc``, and the
    command that installs it (None when no declared requirement says which); None when
    nothing missing can be named.

    A ``ModuleNotFoundError`` names the module; otherwise the requirements of ``dist``'s
    extras (the ``test`` extra carries the peers) are checked for any that is not installed.
    """
    reqs = _requirements(dist) if dist else []
    module = _missing_module(exc)
    if module is not None:
        want = _norm(module)
        for name, extra in reqs:
            if name == want or name.replace("-", "") == want.replace("-", ""):
                pkg = f"{dist}[{extra}]" if extra else dist
                return (f"the Python package {name!r} (declared by {pkg}) cannot be imported",
                        f"pip install {shlex.quote(pkg)}")
        owner = f"a declared requirement of {dist}" if dist else "traced to a distribution"
        return f"the Python module {module!r} cannot be imported (not {owner})", None
    by_extra: dict[str, list[str]] = {}
    for name, extra in reqs:
        if extra is not None and not _importable(name):
            by_extra.setdefault(extra, []).append(name)
    if not by_extra:
        return None
    extras = sorted(by_extra)
    missing = sorted({n for names in by_extra.values() for n in names})
    pkg = f"{dist}[{','.join(extras)}]"
    return f"{', '.join(missing)} (declared by {pkg})", f"pip install {shlex.quote(pkg)}"


def peer_distribution(reg: Registry, peer: Peer) -> str:
    """The distribution of the plugin that offered ``peer`` (\"\" when unknown)."""
    from importlib import metadata

    dists = {p.name: p.distribution for p in reg.plugins}
    for impl in reg.manager.hook.register_demo_peers.get_hookimpls():
        got: list[Peer] = []
        try:
            impl.function(register=got.append)
        except Exception:
            continue
        if any(g.name == peer.name for g in got) and dists.get(impl.plugin_name):
            return dists[impl.plugin_name]
    top = getattr(peer.start, "__module__", "").split(".")[0]
    found = metadata.packages_distributions().get(top, [])
    return found[0] if found else ""
