"""The HTML report: rendered in headless Chromium from real runs of the suite, its matrix
cells and verdict read off the rendered page; device strings stay text; nothing external."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from conformance_chromium import Chromium, chromium_path, need_chromium
from conformance_targets import sim_target

from powerplane import ChannelType, hookimpl
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig, parse_target
from powerplane.testing import registered
from powerplane_conformance.api import run_suite
from powerplane_conformance.html import render_html, write_html

HOSTILE = {
    "manufacturer": "<script>document.title='owned'</script>",
    "model": '"><img src="http://example.invalid/x.png" onerror="alert(1)">',
    "firmware": "1.0 & <b>2.0</b>",
}
"""What a hostile (or merely odd) device says it is."""

IDENTIFIED = "html-identified"
"""A simulated channel type that reports :data:`HOSTILE` as its identity."""

MATRIX_JS = """Array.from(document.querySelectorAll('tr.verb-row')).map(row => {
  const cell = row.querySelector('.status');
  return {channel: row.dataset.channel, verb: row.dataset.verb, word: cell.innerText.trim(),
          background: getComputedStyle(cell).backgroundColor};
})"""
"""The matrix as rendered: each row's channel, verb, the word shown and the cell's colour."""

PAGE_JS = f"""({{
  text: document.body.innerText,
  verdict: document.getElementById('verdict').innerText,
  title: document.title,
  scripts: document.querySelectorAll('script').length,
  images: document.querySelectorAll('img').length,
  identity: Array.from(document.querySelectorAll('[data-identity]')).map(
      td => [td.dataset.identity, td.innerText]),
  checks: Array.from(document.querySelectorAll('tr.check')).map(
      tr => Array.from(tr.cells).map(td => td.innerText.trim())),
  matrix: {MATRIX_JS},
}})"""


class IdentifiedSimulated(SimulatedChannel):
    """Core's simulated channel that answers ``identity`` with :data:`HOSTILE`."""

    async def identity(self, target: str) -> dict[str, str]:
        return dict(HOSTILE)


class _IdentifiedPlugin:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
        register(ChannelType(name=IDENTIFIED, config=SimulatedConfig,
                             factory=IdentifiedSimulated, target=parse_target,
                             description="simulated, with a hostile identity (tests)"))


@pytest.fixture(scope="module")
def identified() -> Iterator[None]:
    with registered(_IdentifiedPlugin(), name="conformance-html-identified"):
        yield


def _run(target: dict[str, Any], work: Path) -> dict[str, Any]:
    summary = run_suite(target, report=work / "results.json")
    return summary.data


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A destructive run on core's simulated channel: every advertised verb checked."""
    return _run(sim_target(), tmp_path_factory.mktemp("full"))


@pytest.fixture(scope="module")
def read_only_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same target with allow_destructive off: no verb can be verified."""
    return _run(sim_target(conformance={"allow_destructive": False}),
                tmp_path_factory.mktemp("ro"))


@pytest.fixture(scope="module")
def failing_run(identified: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A machine whose power-on is silently ignored, on a channel with a hostile identity."""
    return _run(sim_target({"faults": {"*": "silent"}}, machines={"m1": "off"},
                           conformance={"settle_timeout_s": 0.3}, type_name=IDENTIFIED),
                tmp_path_factory.mktemp("fail"))


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    binary = need_chromium(chromium_path(), os.environ)
    with Chromium(binary, tmp_path_factory.mktemp("chromium")) as chromium:
        yield chromium


def _rendered(browser: Chromium, data: dict[str, Any], path: Path) -> dict[str, Any]:
    page: dict[str, Any] = browser.render(write_html(data, path), PAGE_JS)
    return page


def _cells(page: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {row["verb"]: row for row in page["matrix"]}


def _rgb(css: str) -> tuple[int, int, int]:
    found = re.fullmatch(r"rgba?\((\d+), (\d+), (\d+)(?:, [\d.]+)?\)", css)
    assert found, css
    r, g, b = (int(x) for x in found.groups())
    return r, g, b


# --- on the rendered page (headless Chromium) ----------------------------------------

@pytest.mark.slow
def test_full_run_renders_every_advertised_verb_verified_in_green(
    browser: Chromium, full_run: dict[str, Any], tmp_path: Path
) -> None:
    page = _rendered(browser, full_run, tmp_path / "report.html")
    cells = _cells(page)
    for verb in ("reboot", "shutdown", "power-on"):
        assert cells[verb]["word"] == "verified", cells[verb]
        r, g, b = _rgb(cells[verb]["background"])
        assert g > r and g > b, (verb, cells[verb]["background"])  # green
    assert cells["terminate"]["word"] == "not advertised"
    assert "verdict: PASS" in page["verdict"]
    assert "every advertised verb verified" in page["verdict"]
    assert page["title"] == "powerplane conformance: PASS"
    passed = [row for row in page["checks"] if row[0] == "PASS"]
    assert passed and all(row[1] for row in passed)  # each with its assertion id


@pytest.mark.slow
def test_read_only_run_renders_not_verified_and_an_incomplete_verdict(
    browser: Chromium, read_only_run: dict[str, Any], tmp_path: Path
) -> None:
    page = _rendered(browser, read_only_run, tmp_path / "report.html")
    cells = _cells(page)
    colours = set()
    for verb in ("reboot", "shutdown", "power-on"):
        assert cells[verb]["word"] == "not verified", cells[verb]
        colours.add(cells[verb]["background"])
    assert "verdict: INCOMPLETE" in page["verdict"]
    assert "not verified: 3 of 3 advertised verbs untested" in page["verdict"]
    assert "PASS" not in page["verdict"]
    assert "allow_destructive is off" in page["text"]  # the reason, on the page
    r, g, b = _rgb(colours.pop())
    assert not colours and r > b and g > b  # amber, not the green of "verified"


@pytest.mark.slow
def test_failing_run_renders_failed_cells_the_failed_check_and_the_identity_as_text(
    browser: Chromium, failing_run: dict[str, Any], tmp_path: Path
) -> None:
    page = _rendered(browser, failing_run, tmp_path / "report.html")
    cells = _cells(page)
    assert cells["power-on"]["word"] == "FAILED"
    r, g, b = _rgb(cells["power-on"]["background"])
    assert r > g and r > b  # red
    assert "verdict: FAIL" in page["verdict"]
    failed = [row for row in page["checks"] if row[0] == "FAIL"]
    ids = {row[1].splitlines()[0] for row in failed}
    assert "POWER_ON_READBACK" in ids
    readback = next(row for row in failed if row[1].startswith("POWER_ON_READBACK"))
    assert readback[3] == "n-m1"  # node
    assert "observed: off" in readback[6]  # message
    assert re.search(r"\d\.\d{3} s|\d+\.\d s", readback[5]), readback  # time
    # the device's own words, shown as text, never run or loaded
    assert dict(page["identity"]) == HOSTILE
    assert page["scripts"] == 0 and page["images"] == 0
    assert page["title"] == "powerplane conformance: FAIL"


ADVERTISED_JS = """Object.fromEntries(Array.from(document.querySelectorAll('tr.verb-row')).map(
  row => [row.dataset.verb, row.querySelector('.advertised').innerText.trim()]))"""
"""Per verb, the matrix's advertised cell as rendered (``yes (graceful)``, ``no``)."""

NODE_LINES_JS = """Array.from(document.querySelectorAll('td.node'))
  .filter(td => td.innerText.trim())
  .map(td => { const r = document.createRange(); r.selectNodeContents(td);
               return [td.innerText.trim(), r.getClientRects().length]; })"""
"""Each node cell's name and the number of lines it is laid out on."""

LONG_NODE = "rack-07-control-plane-node-0042-eu-west"
"""A node name with many places a browser could break it (after each hyphen)."""


@pytest.mark.slow
@pytest.mark.parametrize("graceful", [True, False])
def test_the_matrix_says_graceful_or_hard_for_each_advertised_verb(
    browser: Chromium, tmp_path: Path, graceful: bool
) -> None:
    """As the demo's terminal matrix does: how each advertised verb is carried out."""
    data = _run(sim_target({"graceful": graceful}, conformance={"allow_destructive": False}),
                tmp_path)
    shown = browser.render(write_html(data, tmp_path / "r.html"), ADVERTISED_JS)
    word = "graceful" if graceful else "hard"
    assert shown == {"reboot": f"yes ({word})", "shutdown": f"yes ({word})",
                     "power-on": f"yes ({word})", "terminate": "no"}, shown


def test_nodes_that_differ_are_named_with_their_mode() -> None:
    data = _hand_made()
    data["channels"][0]["capabilities"] = {"n1": {"verbs": {"reboot": "graceful"}},
                                           "n2": {"verbs": {"reboot": "hard"}}}
    assert "(graceful on n1, hard on n2)" in render_html(data)


@pytest.mark.slow
def test_node_names_do_not_wrap_in_a_narrow_window(browser: Chromium, tmp_path: Path) -> None:
    """A long hyphenated node name stays on one line, in the checks and in the list of
    checks an interrupted run did not run, even where the page is narrow."""
    data = _hand_made()
    data["results"][0].update(node=LONG_NODE, message="observed: " + "off, then on " * 40)
    data["results"].append({**data["results"][0], "id": "SHUTDOWN_READBACK",
                            "node": "n-2", "channel": "lab-with-a-long-name-too"})
    data["interrupted"] = {"cause": "signal SIGINT", "during": "REBOOT_READBACK on n1@lab",
                           "checks_collected": 3, "not_finished": [],
                           "not_run": [{"id": "STATE_RESTORED", "node": LONG_NODE,
                                        "channel": "lab", "verb": None}],
                           "machines": [], "machines_restored": None}
    path = write_html(data, tmp_path / "r.html")
    page = browser.page()
    try:
        page.call("Emulation.setDeviceMetricsOverride", width=480, height=800,
                  deviceScaleFactor=1, mobile=False)
        page.load(path.resolve().as_uri())
        lines = page.evaluate(NODE_LINES_JS)
    finally:
        page.close()
    assert [name for name, _ in lines].count(LONG_NODE) == 2, lines
    assert all(n == 1 for _, n in lines), lines


# --- the HTML itself -----------------------------------------------------------------

class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.style = ""
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data


def _parse(text: str) -> _Tags:
    parser = _Tags()
    parser.feed(text)
    parser.close()
    return parser


def _hand_made() -> dict[str, Any]:
    """A failing document with hostile strings wherever the device or target puts text."""
    evil = "<script>alert('x')</script>"
    return {
        "suite": {"name": "powerplane-conformance", "version": "0"},
        "verdict": "fail", "conformant": False,
        "headline": "fail: 1 check failed", "verdict_reason": f"failed: {evil}",
        "target": f"/tmp/{evil}.yaml",
        "channels": [{"name": "lab", "type": "simulated",
                      "plugin": {"name": evil, "version": "1"},
                      "identity": {**HOSTILE, "serial": evil}, "capabilities": {}}],
        "matrix": [{"channel": "lab", "type": "simulated", "verbs": [
            {"verb": "reboot", "advertised": True, "status": "failed", "reasons": [evil],
             "checks": {"pass": 0, "fail": 1, "skip": 0, "not_tested": 0, "xfail": 0}}]}],
        "counts": {"pass": 0, "fail": 1, "skip": 0, "not_tested": 0, "xfail": 0},
        "results": [{"id": "REBOOT_READBACK", "text": evil, "channel": "lab", "node": evil,
                     "verb": "reboot", "outcome": "fail", "message": f"observed: {evil}",
                     "latency_s": 0.25, "test": "t", "restore_failed": evil,
                     "duration_s": 1.5}],
    }


def test_hostile_strings_stay_text() -> None:
    text = render_html(_hand_made())
    tags = _parse(text)
    names = {tag for tag, _ in tags.tags}
    assert not names & {"script", "img", "iframe", "object", "embed", "link", "b"}
    assert "<script>" not in text and "<img" not in text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert "&lt;img src=&quot;http://example.invalid/x.png&quot;" in text
    assert "1.0 &amp; &lt;b&gt;2.0&lt;/b&gt;" in text
    for _, attrs in tags.tags:
        assert all("<" not in (value or "") for _, value in attrs), attrs
    assert "1.500 s" in text and "latency 0.250 s" in text


def test_the_page_references_nothing_outside_itself(full_run: dict[str, Any]) -> None:
    for data in (full_run, _hand_made()):
        text = render_html(data)
        tags = _parse(text)
        for tag, attrs in tags.tags:
            keys = {k for k, _ in attrs}
            assert not keys & {"src", "href", "srcset", "action", "data", "poster"}, tag
        assert not {t for t, _ in tags.tags} & {"script", "link", "iframe", "img"}
        assert "url(" not in tags.style and "@import" not in tags.style
        assert not re.search(r"(src|href)\s*=\s*[\"']?https?:", text, re.I)


def test_a_document_without_a_matrix_is_never_shown_as_a_pass() -> None:
    """results.json written before it carried a matrix said "pass" with every verb
    unverified; the page derives the matrix and verdict from the checks instead."""
    data = _hand_made()
    del data["matrix"], data["headline"], data["verdict_reason"]
    data["verdict"], data["conformant"] = "pass", True
    data["channels"][0]["capabilities"] = {"n1": {"verbs": {"reboot": "graceful"}}}
    data["results"] = [{"id": "REBOOT_READBACK", "text": "", "channel": "lab", "node": "n1",
                        "verb": "reboot", "outcome": "not_tested",
                        "message": "allow_destructive is off in the target file"}]
    text = render_html(data)
    assert "verdict: INCOMPLETE" in text and "verdict: PASS" not in text
    assert "not verified: 1 of 1 advertised verbs untested" in text
    assert 'data-status="not_verified"' in text


def test_write_html_writes_the_rendered_page(full_run: dict[str, Any], tmp_path: Path) -> None:
    out = write_html(full_run, tmp_path / "r.html")
    assert out == tmp_path / "r.html"
    assert out.read_text(encoding="utf-8") == render_html(full_run)


def test_the_report_carries_no_secret(full_run: dict[str, Any]) -> None:
    assert os.environ["PP_CONFORMANCE_TEST_PASSWORD"] not in render_html(full_run)


# --- when there is no browser ---------------------------------------------------------

def test_missing_chromium_skips_outside_ci_and_fails_under_ci() -> None:
    assert need_chromium("/usr/bin/chromium", {"CI": "1"}) == "/usr/bin/chromium"
    with pytest.raises(pytest.skip.Exception):
        need_chromium(None, {})
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        need_chromium(None, {"CI": "true"})
