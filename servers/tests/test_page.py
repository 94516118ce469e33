"""The page in headless Chromium (Debian's, driven by Playwright; no browser download),
in auth-proxy mode (each browser context carries its user's identity headers, as the
proxy on loopback would): a cordon-only engineer sees only cordon, requests it and watches
it reach Cordoned; an admin reboots through the full ceremony (a wrong typed name refused)
and meets the hazard tier on the last-margin node; a below-quorum shutdown shows the
numbers and no button; a shutdown shows PowerOffConfirmed True on the out-of-band channel
and Unknown, with why, on the on-only one. Screenshots of each step go to a temporary
folder (``$POWERPLANE_SCREENSHOTS`` to keep them)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from servers_support import (
    ADMIN,
    ENGINEER,
    ceremony,
    free_port,
    make_app,
    served,
    write_fleet,
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--headless"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="Debian's chromium is not installed "
                                       "(apt-get install chromium)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        found = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield found
        found.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    keep = os.environ.get("POWERPLANE_SCREENSHOTS")
    folder = Path(keep) if keep else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def site(tmp_path: Path, browser: Any) -> Iterator[str]:
    app = make_app(write_fleet(tmp_path))
    with served(app) as base:
        yield base
        for context in browser.contexts:  # their event streams end before the server
            context.close()


def page_as(browser: Any, base: str, headers: dict[str, str]) -> Any:
    context = browser.new_context(base_url=base, extra_http_headers=headers,
                                  viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    return page


def test_engineer_sees_only_cordon_and_watches_it_reach_cordoned(
        browser: Any, site: str, shots: Path) -> None:
    page = page_as(browser, site, ENGINEER)
    page.goto("/")
    row = page.locator("tr[data-node='bmc-1']")
    row.wait_for()
    assert row.locator("button[data-action]").all_inner_texts() == ["Cordon"]
    assert sorted(row.locator("[data-withheld]").evaluate_all(
        "els => els.map(e => e.dataset.withheld)")) == ["drain", "reboot", "shutdown"]
    withheld = row.locator("[data-withheld='reboot']")
    withheld.focus()
    tip = withheld.locator("[role=tooltip]")
    assert tip.is_visible() and "Not allowed for you" in tip.inner_text()
    agent = page.locator("tr[data-node='inband-1'] [data-withheld='shutdown'] [role=tooltip]")
    assert "Withheld: shutdown withheld" in agent.inner_text()
    page.screenshot(path=str(shots / "01-engineer-list.png"))
    row.locator("button[data-action='cordon']").click()
    dialog = page.locator("dialog#ceremony")
    page.locator("#c-reason").wait_for()
    assert dialog.is_visible()
    assert page.locator("#c-node").count() == 0  # a cordon asks a reason only
    page.fill("#c-reason", "swap the rack switch")
    page.screenshot(path=str(shots / "02-engineer-cordon-dialog.png"))
    page.click("#ceremony-submit")
    page.wait_for_url("**/#/maintenance/*")
    page.locator("#phase", has_text="Cordoned").wait_for()
    page.screenshot(path=str(shots / "03-engineer-cordoned.png"))


def test_admin_reboots_through_the_ceremony_and_meets_the_hazard(
        browser: Any, site: str, shots: Path) -> None:
    page = page_as(browser, site, ADMIN)
    page.goto("/")
    page.locator("tr[data-node='bmc-1'] button[data-action='reboot']").click()
    dialog = page.locator("dialog#ceremony")
    page.locator("#preflight").wait_for()
    assert dialog.is_visible() and "hazard" not in (dialog.get_attribute("class") or "")
    page.fill("#c-reason", "kernel 6.12 update")
    page.check("#c-ack")
    page.fill("#c-node", "bmc-2")
    page.click("#ceremony-submit")
    problem = page.locator("#ceremony-problems li")
    problem.first.wait_for()
    assert "did not match" in problem.first.inner_text()
    page.screenshot(path=str(shots / "04-admin-wrong-name.png"))
    page.fill("#c-node", "bmc-1")
    page.click("#ceremony-submit")
    page.wait_for_url("**/#/maintenance/*")
    page.locator("#phase", has_text="Complete").wait_for()
    page.screenshot(path=str(shots / "05-admin-reboot-complete.png"))
    page.goto("/#/")
    page.locator("tr[data-node='cp-1'] button[data-action='reboot']").click()
    page.locator("#hazard").wait_for()
    assert "hazard" in (dialog.get_attribute("class") or "")
    assert "⚠️" in page.locator("#ceremony-title").inner_text()
    assert page.locator("#ceremony-title [role=img][aria-label=Warning]").count() == 1
    assert page.locator("#c-hazard").is_visible() and page.locator("#c-node").is_visible()
    page.screenshot(path=str(shots / "06-admin-hazard.png"))


def test_below_quorum_shows_the_numbers_and_no_button(
        browser: Any, site: str, shots: Path) -> None:
    r = httpx.post(f"{site}/api/v1/maintenances", headers=ADMIN,
                   json=ceremony("cp-1", "shutdown", hazardReason="replace the failed PSU"))
    assert r.status_code == 201, r.text
    page = page_as(browser, site, ADMIN)
    page.goto("/")
    page.locator("tr[data-node='cp-2'] button[data-action='shutdown']").click()
    page.locator("#refusal").wait_for()
    numbers = {n: page.locator(f"[data-number={n}]").inner_text()
               for n in ("members", "ready", "quorum", "margin")}
    assert numbers == {"members": "5", "ready": "3", "quorum": "3", "margin": "0"}
    assert not page.locator("#ceremony-submit").is_visible()
    assert page.locator("#c-reason").count() == 0
    page.screenshot(path=str(shots / "07-below-quorum-refused.png"))


@pytest.mark.parametrize(("node", "status", "words"), [
    ("bmc-2", "True", "observed the machine off"),
    ("talos-1", "Unknown", "cannot see the machine off"),
])
def test_shutdown_shows_power_off_confirmed_honestly(
        browser: Any, site: str, shots: Path, node: str, status: str, words: str) -> None:
    page = page_as(browser, site, ADMIN)
    page.goto("/")
    page.locator(f"tr[data-node='{node}'] button[data-action='shutdown']").click()
    page.locator("#c-reason").wait_for()
    page.fill("#c-reason", "replace the PSU fan")
    page.check("#c-ack")
    page.fill("#c-node", node)
    page.click("#ceremony-submit")
    page.wait_for_url("**/#/maintenance/*")
    page.locator("#phase", has_text="PoweredOff").wait_for()
    box = page.locator("#power-off-confirmed", has_text=f"PowerOffConfirmed: {status}")
    box.wait_for()
    assert words in box.inner_text()
    page.screenshot(path=str(shots / f"08-shutdown-{node}.png"))


def test_demo_login_by_the_code_flow_in_the_browser(browser: Any, shots: Path) -> None:
    """``serve --demo``: eve logs in at the loopback issuer (code flow with PKCE), holds a
    session cookie, sees only cordon, and her cordon (sent with the session's CSRF token)
    reaches Cordoned."""
    from test_cli import start, wait_up

    started: list[Any] = []
    port = free_port()
    try:
        start(["serve", "--demo", "--port", str(port)], started)
        wait_up(f"http://127.0.0.1:{port}/api/v1/openapi.json")
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.goto(f"http://127.0.0.1:{port}/auth/login")
        page.fill("input[name=sub]", "eve")
        page.click("button[type=submit]:has-text('Authorize')")
        page.wait_for_url(f"http://127.0.0.1:{port}/")
        page.locator("#who", has_text="Signed in as eve (plant-eng)").wait_for()
        cookie = next(c for c in context.cookies() if c["name"] == "pp_session")
        assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
        row = page.locator("tr[data-node='bmc-2']")
        row.wait_for()
        assert row.locator("button[data-action]").all_inner_texts() == ["Cordon"]
        page.screenshot(path=str(shots / "09-demo-eve-logged-in.png"))
        row.locator("button[data-action='cordon']").click()
        page.locator("#c-reason").wait_for()
        page.fill("#c-reason", "swap the rack switch")
        page.click("#ceremony-submit")
        page.locator("#phase", has_text="Cordoned").wait_for()
        context.close()
    finally:
        for proc in started:
            proc.terminate()
            proc.wait(timeout=20)
