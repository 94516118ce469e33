"""One backoff (issue 38): core's :class:`powerplane.scheduling.Backoff`, used everywhere a
retry waits, and a scan of every source file that fails on a second one.

The scan looks for what a backoff of one's own is made of: a function or class named for
one, a wait grown by multiplying itself (``delay = min(delay * 2, cap)``, ``wait *= 2``),
and a ``sleep`` of a computed product (``sleep(0.2 * (attempt + 1))``). Left, each with its
reason, are the polls that read until a state shows (their cadence is not a retry after a
failure) and one growth that is no wait at all.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from powerplane import Backoff, Retrying
from powerplane.scheduling import Backoff as CoreBackoff

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "core" / "src", ROOT / "conformance" / "src", ROOT / "demo" / "src",
           ROOT / "servers" / "src", *sorted((ROOT / "plugins").glob("*/src"))]
HOME = "core/src/powerplane/scheduling.py"

NOT_RETRIES = {
    ("core/src/powerplane/readback.py", "PowerOffWatch._run"):
        "reads until the node shows off: a poll's cadence, not a wait after a failure",
    ("core/src/powerplane/host/reading.py", "Reader.await_state"):
        "reads back until the expected state: a poll's cadence",
    ("core/src/powerplane/testing/process.py", "Subprocess._wait_exit"):
        "waits for a child to exit: a poll's cadence",
    ("core/src/powerplane/testing/process.py", "wait_ready"):
        "waits for a peer to be ready: a poll's cadence",
    ("conformance/src/powerplane_conformance/model.py", "poll_delays"):
        "the pauses between readings while a state settles: a poll's cadence (x1.5)",
    ("core/src/powerplane/authority/audit.py", "JsonLinesAudit._tail"):
        "reads a file backwards in growing chunks: no wait",
}


class _Finder(ast.NodeVisitor):
    """The backoff-like constructs of one module: (where, what)."""

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.found: list[tuple[str, str]] = []

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        if "backoff" in node.name.lower():
            self.found.append((".".join(self.scope) or "<module>", f"defines {node.name}"))
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _def

    def _note(self, node: ast.AST) -> None:
        self.found.append((".".join(self.scope) or "<module>", ast.unparse(node)))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, (ast.Mult, ast.Pow, ast.LShift)):
            self._note(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        targets = {ast.unparse(e) for t in node.targets
                   for e in (t.elts if isinstance(t, ast.Tuple) else [t])}
        for part in ast.walk(node.value):
            if isinstance(part, ast.BinOp) and isinstance(part.op, (ast.Mult, ast.Pow,
                                                                     ast.LShift)) \
                    and {ast.unparse(part.left), ast.unparse(part.right)} & targets:
                self._note(node)
                return

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else (
            node.func.id if isinstance(node.func, ast.Name) else "")
        if name.lstrip("_") == "sleep" and any(
                isinstance(p, ast.BinOp) and isinstance(p.op, (ast.Mult, ast.Pow))
                for a in node.args for p in ast.walk(a)):
            self._note(node)
        self.generic_visit(node)


def backoffs() -> dict[tuple[str, str], list[str]]:
    """Every backoff-like construct in the source trees, by (file, enclosing scope)."""
    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted(p for src in SOURCES for p in src.rglob("*.py")):
        finder = _Finder()
        finder.visit(ast.parse(path.read_text(encoding="utf-8")))
        for scope, what in finder.found:
            out.setdefault((str(path.relative_to(ROOT)), scope), []).append(what)
    return out


def test_there_is_one_backoff_and_it_is_cores() -> None:
    found = backoffs()
    assert found.pop((HOME, "<module>")) == ["defines Backoff"]
    stray = {k: v for k, v in found.items() if k not in NOT_RETRIES}
    assert stray == {}, ("a backoff of its own (use powerplane.Backoff), or a poll to list "
                         f"in NOT_RETRIES with its reason: {stray}")
    assert set(found) == set(NOT_RETRIES), "a listed poll is gone: take it off the list"


def test_the_scan_sees_a_doubling_loop_a_linear_sleep_and_a_named_one(tmp_path: Path) -> None:
    finder = _Finder()
    finder.visit(ast.parse(
        "async def again():\n"
        "    backoff = 0.2\n"
        "    while True:\n"
        "        await asyncio.sleep(backoff)\n"
        "        backoff = min(2 * backoff, 10)\n"
        "async def linear(attempt):\n"
        "    await asyncio.sleep(0.2 * (attempt + 1))\n"
        "def wait_more(w):\n"
        "    w *= 2\n"
        "class ExpBackoff: pass\n"))
    assert [scope for scope, _ in finder.found] == ["again", "linear", "wait_more",
                                                    "<module>"]


def test_the_waits_double_under_the_cap_and_never_fall_below_the_first() -> None:
    low, high = Backoff(0.2, 10.0, draw=lambda: 0.0), Backoff(0.2, 10.0, draw=lambda: 1.0)
    assert [high.delay(n) for n in range(8)] == [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0]
    assert [low.delay(n) for n in range(8)] == [0.2] * 8
    assert high.delay(10_000) == 10.0  # no overflow however long it failed
    half = Backoff(0.2, 10.0, draw=lambda: 0.5)
    assert half.delay(3) == pytest.approx(0.2 + (1.6 - 0.2) / 2)
    assert Backoff(5.0, 1.0, draw=lambda: 0.5).delay(0) == 1.0  # the cap wins
    assert high.delay(2, hint=30.0) == 10.0 and high.delay(2, hint=3.0) == 3.0


def test_a_retry_loop_logs_the_wait_it_waits_and_starts_over_after_a_success() -> None:
    draws = iter([0.5, 0.25, 0.75, 0.5])
    retry = Backoff(1.0, 8.0, draw=lambda: next(draws)).retrying()
    assert isinstance(retry, Retrying)
    assert retry.next_s == retry.next_s == 1.0  # drawn once: the floor, at the first
    retry.failed()
    assert retry.next_s == 1.25  # 1 + (2 - 1) * 0.25
    retry.failed()
    assert retry.next_s == 1.0 + 3.0 * 0.75
    retry.reset()
    assert (retry.attempt, retry.next_s) == (0, 1.0)


def test_the_channel_sdk_gives_cores_backoff() -> None:
    assert Backoff is CoreBackoff
