"""One status-code rule and one TLS-failure test (issue 38): core's
:func:`powerplane.status_error` and :func:`powerplane.is_tls_failure`, in the channel SDK,
applied by every plugin; a scan of every source file fails on a second of either.

What the scan takes for a copy: a function of either name defined elsewhere; the rule's
own pair of statuses as a literal (``status in (401, 403)``) or a comparison with 403; the
test's own words, OpenSSL's (``"CERTIFICATE_VERIFY_FAILED"``), or its class
(``ssl.SSLCertVerificationError``) in code. Docstrings and comments may name them.
"""

from __future__ import annotations

import ast
import ssl
from pathlib import Path

import pytest

from powerplane import (
    AuthenticationFailed,
    RefusedByDevice,
    is_tls_failure,
    status_error,
)
from powerplane.errors import CERTIFICATE_WORDS

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "core" / "src", ROOT / "conformance" / "src", ROOT / "demo" / "src",
           ROOT / "servers" / "src", *sorted((ROOT / "plugins").glob("*/src"))]
HOME = "core/src/powerplane/errors.py"
NAMES = {"status_error", "is_tls_failure"}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value,
                                                                      ast.Constant):
                out.add(id(body[0].value))
    return out


def copies(tree: ast.AST) -> list[str]:
    """What in one module's code copies the rule or the test."""
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in NAMES:
            found.append(f"defines {node.name}")
        elif isinstance(node, (ast.Tuple, ast.Set, ast.List)):
            values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if values == {401, 403}:  # the pair (a list of documented answers is no rule)
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value == 403
                for c in (node.left, *node.comparators)):
            found.append(ast.unparse(node))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docs \
                and any(word in node.value for word in CERTIFICATE_WORDS):
            found.append(repr(node.value))
        elif isinstance(node, ast.Attribute) and node.attr == "SSLCertVerificationError":
            found.append(ast.unparse(node))
    return found


def test_every_plugin_applies_cores_rule_and_test_and_keeps_no_copy() -> None:
    found = {}
    for path in sorted(p for src in SOURCES for p in src.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where != HOME:
            hits = copies(ast.parse(path.read_text(encoding="utf-8")))
            if hits:
                found[where] = hits
    assert found == {}, f"a second status rule or TLS test (use powerplane's): {found}"
    users = {str(p.relative_to(ROOT)) for src in SOURCES for p in src.rglob("*.py")
             if "status_error" in p.read_text(encoding="utf-8") and str(
                 p.relative_to(ROOT)) != HOME}
    for plugin in ("pdu", "cloud", "redfish", "metal3", "talos"):
        assert any(f"plugins/{plugin}/" in u for u in users), plugin


def test_the_scan_sees_each_kind_of_copy() -> None:
    code = ("import ssl\n"
            "def status_error(s):\n"
            "    return 'auth' if s in (401, 403) else 'refused'\n"
            "def forbidden(s):\n"
            "    return s == 403\n"
            "def tls(e):\n"
            "    return isinstance(e, ssl.SSLCertVerificationError) or "
            "'CERTIFICATE_VERIFY_FAILED' in str(e)\n")
    assert len(copies(ast.parse(code))) == 5
    assert copies(ast.parse('"""401 and 403, CERTIFICATE_VERIFY_FAILED"""\n')) == []


@pytest.mark.parametrize("status", range(400, 600))
def test_the_rule_for_every_error_status(status: int) -> None:
    want = AuthenticationFailed if status in (401, 403) else RefusedByDevice
    assert status_error(status) is want


@pytest.mark.parametrize("status", [200, 204, 302, 399, 600, True])
def test_a_status_that_is_no_error_is_the_callers_to_decide(status: int) -> None:
    with pytest.raises(ValueError, match="not an error status"):
        status_error(status)


def _raised(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as caught:
        return caught


def test_a_failed_certificate_anywhere_in_the_chain_is_a_tls_failure() -> None:
    verify = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] "
                                             "certificate verify failed")
    assert is_tls_failure(verify)
    assert is_tls_failure(_raised(ConnectionError("connect"), verify))  # wrapped (httpx)
    assert is_tls_failure(OSError("HTTPSConnectionPool: certificate verify failed"))
    assert is_tls_failure(ssl.SSLError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] x"))
    assert not is_tls_failure(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version"))
    assert not is_tls_failure(_raised(ConnectionError("refused"), ConnectionRefusedError()))
    looped = ValueError("a")
    looped.__context__ = ValueError("b")
    looped.__context__.__context__ = looped  # a cycle ends the walk
    assert not is_tls_failure(looped)
