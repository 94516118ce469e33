"""The conformance report as one self-contained HTML page, rendered from results.json.

:func:`render_html` turns the results.json document (``report.build_results``) into one
page: the verdict, its headline and reason at the top; each channel's device identity;
the advertised-versus-verified matrix per channel and verb, each cell a colour *and* a
word (readable without colour); and every check with its outcome, assertion id, node,
message and time. Inline CSS only: no script, no external resource, so the file can be
mailed, archived or opened offline. Every string from the device or the target file is
escaped, so a device that names itself ``<script>`` shows as that text.

It renders what the document says and adds nothing: no configuration value, no secret
(the document is redacted when it is written). A document written before results.json
carried a ``matrix`` gets its matrix and verdict derived from its checks by the same
rule (and the page says so), so an old "pass" with unverified verbs is not shown as one.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from powerplane import Verb

__all__ = ["render_html", "write_html"]

STATUS_WORDS = {
    "verified": "verified",
    "not_verified": "not verified",
    "failed": "FAILED",
    "not_advertised": "not advertised",
}
"""A matrix cell's status and the word shown for it."""

OUTCOME_WORDS = {
    "pass": "PASS",
    "fail": "FAIL",
    "skip": "SKIP",
    "not_tested": "NOT TESTED",
    "xfail": "XFAIL",
}
"""A check's outcome and the word shown for it."""

VERDICT_WORDS = {"pass": "PASS", "incomplete": "INCOMPLETE", "fail": "FAIL",
                 "interrupted": "INTERRUPTED"}
"""The run's verdict and the word shown for it."""

IDENTITY_KEYS = ("manufacturer", "model", "firmware")
"""The identity fields every channel shows (``not reported`` when the device gave none)."""

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem;
  color: #1f2328; background: #ffffff; line-height: 1.4; }
h1 { font-size: 1.5rem; margin: 0 0 .3rem 0; }
h2 { font-size: 1.15rem; margin: 1.6rem 0 .5rem 0; }
table { border-collapse: collapse; margin: .3rem 0 1rem 0; }
th, td { border: 1px solid #8c959f; padding: .3rem .5rem; text-align: left;
  vertical-align: top; }
th { background: #eaeef2; }
.verdict { border: 2px solid #1f2328; padding: .8rem 1rem; border-radius: 4px; }
.verdict-word { font-weight: bold; letter-spacing: .05em; }
.meta { color: #57606a; font-size: .9rem; }
.note { border-left: 4px solid #9a6700; padding-left: .6rem; }
.status, .outcome { font-weight: bold; white-space: nowrap; }
.detail { font-size: .85rem; font-weight: normal; }
.detail ul { margin: .2rem 0 0 1rem; padding: 0; }
.message { white-space: pre-wrap; font-family: ui-monospace, monospace; font-size: .85rem;
  max-width: 60rem; overflow-wrap: anywhere; }
.num { text-align: right; white-space: nowrap; }
.name { white-space: nowrap; }
.mode { font-weight: normal; font-size: .85rem; }
.st-verified, .oc-pass, .v-pass { background: #dafbe1; color: #0f5323; }
.st-failed, .oc-fail, .v-fail { background: #ffd8d3; color: #82071e; }
.st-not_verified, .oc-not_tested, .v-incomplete { background: #fff1b8; color: #5c3b00; }
.v-interrupted, .restored-no { background: #ffe0c2; color: #6b2600; }
.st-not_advertised, .oc-skip { background: #eaeef2; color: #424a53; }
.oc-xfail { background: #ddf4ff; color: #0a3069; }
"""


def _e(value: object) -> str:
    """``value`` as escaped HTML text (``None``: empty)."""
    return "" if value is None else html.escape(str(value), quote=True)


def _seconds(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"


def _verb_order() -> list[str]:
    return [v.value for v in Verb]


def _advertised(channel: Mapping[str, Any]) -> set[str]:
    """The verbs any node of ``channel`` advertises (from its capabilities)."""
    out: set[str] = set()
    caps = channel.get("capabilities") or {}
    for found in caps.values() if isinstance(caps, Mapping) else ():
        verbs = found.get("verbs") if isinstance(found, Mapping) else None
        if isinstance(verbs, Mapping):
            out.update(str(v) for v in verbs)
    return out


def _derive_matrix(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The matrix of a document that has none, by the rule results.json documents:
    failed when any check of the verb failed; verified when advertised, with a PASS or
    XFAIL check and no NOT TESTED one; not_verified otherwise; not_advertised."""
    results: Sequence[Mapping[str, Any]] = data.get("results") or []
    matrix: list[dict[str, Any]] = []
    for ch in data.get("channels") or []:
        name = ch.get("name")
        advertised = _advertised(ch)
        verbs: list[dict[str, Any]] = []
        for verb in _verb_order():
            mine = [r for r in results if r.get("channel") == name and r.get("verb") == verb]
            counts = {k: 0 for k in OUTCOME_WORDS}
            for r in mine:
                key = str(r.get("outcome"))
                counts[key] = counts.get(key, 0) + 1
            reasons: list[str] = []
            for r in mine:
                if r.get("outcome") in ("fail", "not_tested"):
                    msg = str(r.get("message") or "").strip().splitlines()
                    text = f"{OUTCOME_WORDS[str(r['outcome'])]} {r.get('id')}"
                    text += f": {msg[0]}" if msg else ""
                    if text not in reasons:
                        reasons.append(text)
            if counts["fail"]:
                status = "failed"
            elif verb not in advertised:
                status = "not_advertised"
            elif (counts["pass"] or counts["xfail"]) and not counts["not_tested"]:
                status = "verified"
            else:
                status = "not_verified"
                if not mine:
                    reasons.append("no check of this verb ran")
            verbs.append({"verb": verb, "advertised": verb in advertised, "status": status,
                          "reasons": reasons, "checks": counts})
        matrix.append({"channel": name, "type": ch.get("type"), "verbs": verbs})
    return matrix


def _derive_verdict(data: Mapping[str, Any], matrix: Sequence[Mapping[str, Any]]) -> str:
    results = data.get("results") or []
    if any(r.get("outcome") == "fail" for r in results):
        return "fail"
    cells = [c for row in matrix for c in row.get("verbs") or [] if c.get("advertised")]
    if cells and all(c.get("status") == "verified" for c in cells):
        return "pass"
    return "incomplete"


def _derived_headline(data: Mapping[str, Any], verdict: str,
                      matrix: Sequence[Mapping[str, Any]]) -> str:
    cells = [c for row in matrix for c in row.get("verbs") or [] if c.get("advertised")]
    if verdict == "fail":
        n = sum(1 for r in data.get("results") or [] if r.get("outcome") == "fail")
        return f"fail: {n} check{'s' if n != 1 else ''} failed"
    if verdict == "pass":
        return f"pass: every advertised verb verified ({len(cells)} of {len(cells)})"
    left = sum(1 for c in cells if c.get("status") != "verified")
    return f"not verified: {left} of {len(cells)} advertised verbs untested"


def _header(data: Mapping[str, Any], verdict: str, matrix: Sequence[Mapping[str, Any]],
            derived: bool) -> list[str]:
    word = VERDICT_WORDS.get(verdict, verdict.upper())
    headline = data.get("headline") if not derived else _derived_headline(data, verdict, matrix)
    reason = data.get("verdict_reason") if not derived else None
    suite = data.get("suite") or {}
    counts = data.get("counts") or {}
    out = [f'<header class="verdict v-{_e(verdict)}" id="verdict" data-verdict="{_e(verdict)}">',
           f'<p class="verdict-word">verdict: {_e(word)}</p>',
           f"<h1>{_e(headline or word)}</h1>"]
    if reason:
        out.append(f'<p class="reason">{_e(reason)}</p>')
    if derived:
        out.append('<p class="note">This results.json carries no verb matrix (an older '
                   "suite wrote it): the matrix and the verdict below are derived from its "
                   "checks by the current rule.</p>")
    if counts:
        shown = ", ".join(f"{_e(counts.get(k, 0))} {w.lower()}"
                          for k, w in OUTCOME_WORDS.items())
        out.append(f'<p class="meta">checks: {shown}</p>')
    conformant = data.get("conformant")
    if conformant is not None and not derived:
        out.append(f'<p class="meta">conformant for every advertised verb: '
                   f'{"yes" if conformant else "no"}</p>')
    out.append(f'<p class="meta">{_e(suite.get("name") or "powerplane-conformance")} '
               f"{_e(suite.get('version') or '')}"
               + (f"; target {_e(data['target'])}" if data.get("target") else "") + "</p>")
    out.append("</header>")
    return out


def _devices(data: Mapping[str, Any]) -> list[str]:
    channels = data.get("channels") or []
    out = ['<section id="devices"><h2>Devices</h2>']
    if not channels:
        return [*out, "<p>No channel was under test.</p></section>"]
    out.append("<table><thead><tr><th>channel</th><th>type</th><th>plugin</th>"
               + "".join(f"<th>{k}</th>" for k in IDENTITY_KEYS)
               + "<th>also reported</th></tr></thead><tbody>")
    for ch in channels:
        plugin = ch.get("plugin") or {}
        ident = ch.get("identity")
        ident = ident if isinstance(ident, Mapping) else {}
        cells = [
            f"<td>{_e(ch.get('name'))}</td>",
            f"<td>{_e(ch.get('type'))}</td>",
            f"<td>{_e(plugin.get('name'))} {_e(plugin.get('version') or '')}</td>",
        ]
        for key in IDENTITY_KEYS:
            value = ident.get(key)
            cells.append(f'<td data-identity="{key}">{_e(value)}</td>' if value not in
                         (None, "") else f'<td data-identity="{key}">not reported</td>')
        extra = [f"{_e(k)}: {_e(v)}" for k, v in ident.items() if k not in IDENTITY_KEYS]
        cells.append(f"<td>{'<br>'.join(extra)}</td>")
        out.append(f'<tr data-channel="{_e(ch.get("name"))}">{"".join(cells)}</tr>')
    out.append("</tbody></table></section>")
    return out


def _count_text(checks: Mapping[str, Any]) -> str:
    parts = [f"{n} {OUTCOME_WORDS.get(k, k).lower()}" for k, n in checks.items()
             if isinstance(n, int) and n]
    return ", ".join(parts) if parts else "no checks ran"


def _modes(data: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """Per (channel, verb): how the channel advertises it, ``graceful`` or ``hard`` (both,
    node by node, when its nodes differ), from the capabilities results.json records."""
    out: dict[tuple[str, str], str] = {}
    for ch in data.get("channels") or []:
        caps = ch.get("capabilities") if isinstance(ch, Mapping) else None
        if not isinstance(caps, Mapping):
            continue
        by_verb: dict[str, dict[str, str]] = {}
        for node, found in caps.items():
            verbs = found.get("verbs") if isinstance(found, Mapping) else None
            for verb, mode in (verbs.items() if isinstance(verbs, Mapping) else ()):
                by_verb.setdefault(str(verb), {})[str(node)] = str(mode)
        for verb, nodes in by_verb.items():
            modes = set(nodes.values())
            out[(str(ch.get("name")), verb)] = modes.pop() if len(modes) == 1 else ", ".join(
                f"{mode} on {node}" for node, mode in nodes.items())
    return out


def _matrix(matrix: Sequence[Mapping[str, Any]],
            modes: Mapping[tuple[str, str], str] | None = None) -> list[str]:
    out = ['<section id="matrix"><h2>Advertised versus verified</h2>']
    if not matrix:
        return [*out, "<p>No channel was under test.</p></section>"]
    out.append("<table><thead><tr><th>channel</th><th>verb</th><th>advertised</th>"
               "<th>result</th><th>checks</th><th>why</th></tr></thead><tbody>")
    for row in matrix:
        channel = row.get("channel")
        for cell in row.get("verbs") or []:
            status = str(cell.get("status") or "not_verified")
            word = STATUS_WORDS.get(status, status)
            reasons = [r for r in cell.get("reasons") or [] if r]
            why = "<ul>" + "".join(f"<li>{_e(r)}</li>" for r in reasons) + "</ul>" \
                if reasons else ""
            mode = (modes or {}).get((str(channel), str(cell.get("verb"))))
            advertised = "no"
            if cell.get("advertised"):
                advertised = "yes" + (f' <span class="mode" data-mode="{_e(mode)}">'
                                      f"({_e(mode)})</span>" if mode else "")
            out.append(
                f'<tr class="verb-row" data-channel="{_e(channel)}" '
                f'data-verb="{_e(cell.get("verb"))}">'
                f'<td class="name">{_e(channel)}<div class="detail">{_e(row.get("type"))}'
                "</div></td>"
                f'<td>{_e(cell.get("verb"))}</td>'
                f'<td class="advertised">{advertised}</td>'
                f'<td class="status st-{_e(status)}" data-status="{_e(status)}">{_e(word)}</td>'
                f'<td class="detail">{_e(_count_text(cell.get("checks") or {}))}</td>'
                f'<td class="detail">{why}</td></tr>')
    out.append("</tbody></table></section>")
    return out


def _checks(results: Iterable[Mapping[str, Any]]) -> list[str]:
    out = ['<section id="checks"><h2>Checks</h2>',
           "<table><thead><tr><th>outcome</th><th>assertion</th><th>channel</th>"
           "<th>node</th><th>verb</th><th>time</th><th>message</th></tr></thead><tbody>"]
    for r in results:
        outcome = str(r.get("outcome"))
        word = OUTCOME_WORDS.get(outcome, outcome.upper())
        time = _seconds(r.get("duration_s"))
        latency = _seconds(r.get("latency_s"))
        if latency:
            time += f"{'<br>' if time else ''}latency {latency}"
        message = str(r.get("message") or "")
        if r.get("restore_failed"):
            message += f"\nrestore failed after the check: {r['restore_failed']}"
        out.append(
            f'<tr class="check" data-id="{_e(r.get("id"))}" data-outcome="{_e(outcome)}">'
            f'<td class="outcome oc-{_e(outcome)}">{_e(word)}</td>'
            f'<td>{_e(r.get("id"))}<div class="detail">{_e(r.get("text"))}</div></td>'
            f'<td class="name">{_e(r.get("channel"))}</td>'
            f'<td class="name node">{_e(r.get("node"))}</td>'
            f"<td>{_e(r.get('verb'))}</td><td class=\"num\">{time}</td>"
            f'<td class="message">{_e(message.strip())}</td></tr>')
    out.append("</tbody></table></section>")
    return out


def _interruption(data: Mapping[str, Any]) -> list[str]:
    """An interrupted run: by what, during what, the checks that did not run, and whether
    each machine was put back the way it was."""
    cut = data.get("interrupted")
    if not isinstance(cut, Mapping):
        return []
    out = ['<section id="interrupted"><h2>Interrupted</h2>',
           f"<p>The run was interrupted ({_e(cut.get('cause') or 'interrupted')})"
           + (f" during {_e(cut['during'])}" if cut.get("during") else "")
           + ": it is not conformant, whatever ran before.</p>"]
    machines = [m for m in cut.get("machines") or [] if isinstance(m, Mapping)]
    if machines:
        out.append('<table id="machines"><thead><tr><th>machine</th><th>state at the start'
                   "</th><th>put back</th><th>why not</th></tr></thead><tbody>")
        for m in machines:
            restored = m.get("restored")
            word = ("restored" if restored is True
                    else "restore sent, not confirmed (outcome unknown)"
                    if m.get("restore") == "sent_not_confirmed"
                    else "NOT restored" if restored is False else "not known")
            css = "st-verified" if restored is True else "restored-no"
            out.append(f'<tr class="machine" data-subject="{_e(m.get("subject"))}" '
                       f'data-restored="{_e(restored)}" '
                       f'data-restore="{_e(m.get("restore"))}">'
                       f'<td class="name">{_e(m.get("subject"))}</td>'
                       f"<td>{_e(m.get('original') or 'never read')}</td>"
                       f'<td class="status {css}">{_e(word)}</td>'
                       f'<td class="detail">{_e(m.get("detail"))}</td></tr>')
        out.append("</tbody></table>")
    else:
        out.append("<p>No machine was under test yet: nothing to put back.</p>")
    rows = [*(cut.get("not_finished") or []), *(cut.get("not_run") or [])]
    out.append(f"<p>{len(rows)} of {_e(cut.get('checks_collected', 0))} checks did not run "
               "to the end:</p>")
    if rows:
        out.append('<table id="not-run"><thead><tr><th>assertion</th><th>channel</th>'
                   "<th>node</th><th>verb</th></tr></thead><tbody>")
        for c in rows:
            if isinstance(c, Mapping):
                out.append(f'<tr class="not-run" data-id="{_e(c.get("id"))}">'
                           f"<td>{_e(c.get('id'))}</td>"
                           f'<td class="name">{_e(c.get("channel"))}</td>'
                           f'<td class="name node">{_e(c.get("node"))}</td>'
                           f"<td>{_e(c.get('verb'))}</td></tr>")
        out.append("</tbody></table>")
    out.append("</section>")
    return out


def render_html(data: Mapping[str, Any]) -> str:
    """The results.json document ``data`` as one self-contained HTML page."""
    raw = data.get("matrix")
    derived = not isinstance(raw, list)
    matrix: list[Mapping[str, Any]] = [*_derive_matrix(data)] if not isinstance(raw, list) \
        else [m for m in raw if isinstance(m, Mapping)]
    verdict = _derive_verdict(data, matrix) if derived else str(data.get("verdict") or "")
    word = VERDICT_WORDS.get(verdict, verdict.upper())
    title = f"powerplane conformance: {word}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        *_header(data, verdict, matrix, derived),
        *_interruption(data),
        *_devices(data),
        *_matrix(matrix, _modes(data)),
        *_checks(data.get("results") or []),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_html(data: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write :func:`render_html` of ``data`` to ``path`` (UTF-8); the path written."""
    out = Path(path)
    out.write_text(render_html(data), encoding="utf-8")
    return out
