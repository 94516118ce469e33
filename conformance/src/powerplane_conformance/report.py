"""``results.json`` and the one-screen summary for people (verdict on the first line)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from powerplane import CapabilitySet, Verb
from powerplane_conformance.model import ONE_NODE
from powerplane_conformance.outcomes import Outcome, Result
from powerplane_conformance.session import ConformanceSession

__all__ = ["SUITE_NAME", "build_results", "summary_text"]

SUITE_NAME = "powerplane-conformance"
MAX_ROWS = 14
MAX_NAMED = 10
"""How many checks that did not run the verdict's reason names (results.json has all)."""
ONE_NODE_HEADLINE = "verified on one node; concurrency not verified (one node)"
"""The headline when every advertised verb passed its checks on the one node under test
and only its concurrency (every node of a channel at once) could not be tried."""


def _channels(sessions: Sequence[ConformanceSession]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for session in sessions:
        for name, subjects in session.channels().items():
            ctype = session.deployment.channels[name].type.name
            caps: dict[str, Any] = {}
            for s in subjects:
                found = session.caps(s)
                if isinstance(found, CapabilitySet):
                    caps[s.node] = {"verbs": found.as_dict(), "source": found.source.value,
                                    "sees_power_off": found.sees_power_off,
                                    "detail": found.detail}
                else:
                    caps[s.node] = {"error": found}
            out.append({
                "name": name,
                "type": ctype,
                "plugin": session.plugin_of(ctype),
                "identity": session.identities.get(name),
                "capabilities": caps,
                "original_state": {s.node: session.original[s.key].value
                                   for s in subjects if s.key in session.original},
            })
    return out


def _tally(rows: Sequence[Result]) -> dict[str, int]:
    tally = {o.value: 0 for o in Outcome}
    for r in rows:
        tally[r.outcome.value] += 1
    return tally


def _first_line(text: str) -> str:
    lines = [x.strip() for x in (text or "").strip().splitlines() if x.strip()]
    return lines[0] if lines else ""


def _where(r: Result) -> str:
    return r.node or r.channel or "the run"


def _failure(r: Result) -> str:
    """One failed check in a line: its id, where, and what was expected and observed (a
    failure's message starts with the assertion's text; the rest is what happened)."""
    lines = [x.strip() for x in (r.message or "").strip().splitlines() if x.strip()]
    msg = " ".join(lines[1:]) if len(lines) > 1 else (lines[0] if lines else "")
    msg = msg.removeprefix(f"{r.id}: ")
    if len(msg) > 200:
        msg = msg[:197] + "..."
    return f"{r.id} on {_where(r)}" + (f": {msg}" if msg else "")


def _by_message(rows: Sequence[Result]) -> dict[str, list[str]]:
    """The distinct first lines of the messages of ``rows``, each with the assertion ids
    that ended with it, in run order."""
    by_msg: dict[str, list[str]] = {}
    for r in rows:
        ids = by_msg.setdefault(_first_line(r.message) or "no reason given", [])
        if r.id not in ids:
            ids.append(r.id)
    return by_msg


def _grouped(rows: Sequence[Result]) -> list[str]:
    """Each distinct message of ``rows`` with the assertion ids that ended with it."""
    return [f"{msg} ({', '.join(ids)})" for msg, ids in _by_message(rows).items()]


def _advertised(channel: dict[str, Any]) -> tuple[set[str], list[str]]:
    """The verbs any node of the channel advertises, and why some nodes' are unknown."""
    verbs: set[str] = set()
    unknown: list[str] = []
    for node, caps in channel.get("capabilities", {}).items():
        if "verbs" in caps:
            verbs |= set(caps["verbs"])
        else:
            unknown.append(f"capabilities of {node} were not discovered: {caps.get('error')}")
    return verbs, unknown


def _verb_cell(
    verb: Verb, advertised: bool, rows: Sequence[Result], unknown: Sequence[str]
) -> dict[str, Any]:
    """One cell of the matrix: the verb on one channel, its status and why."""
    tally = _tally(rows)
    reasons: list[str]
    failed = [r for r in rows if r.outcome is Outcome.FAIL]
    if failed:
        status, reasons = "failed", [_failure(r) for r in failed]
    elif not advertised:
        # what a node that could not be discovered advertises is not known
        status, reasons = ("not_verified", list(unknown)) if unknown else ("not_advertised", [])
    else:
        untested = [r for r in rows if r.outcome is Outcome.NOT_TESTED]
        shown = [r for r in rows if r.outcome in (Outcome.PASS, Outcome.XFAIL)]
        if untested:
            status, reasons = "not_verified", _grouped(untested)
        elif not shown:
            skipped = [r for r in rows if r.outcome is Outcome.SKIP]
            status = "not_verified"
            reasons = (["no check of it passed; every one was skipped: "
                        + "; ".join(_grouped(skipped))] if skipped
                       else ["no check of it ran"])
        else:
            status, reasons = "verified", []
    return {"verb": verb.value, "advertised": advertised, "status": status,
            "reasons": reasons, "checks": tally}


def _matrix(results: Sequence[Result], channels: Sequence[dict[str, Any]],
            interruption: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Advertised versus verified, per channel under test and verb. In an interrupted run a
    verb some of whose checks did not run is not verified, whatever the others showed."""
    cut = [*(interruption or {}).get("not_run", []), *(interruption or {}).get("not_finished", [])]
    out: list[dict[str, Any]] = []
    for ch in channels:
        advertised, unknown = _advertised(ch)
        cells = []
        for verb in Verb:
            rows = [r for r in results if r.channel == ch["name"] and r.verb == verb.value]
            cell = _verb_cell(verb, verb.value in advertised, rows, unknown)
            missed = list(dict.fromkeys(c["id"] for c in cut if c.get("verb") == verb.value
                                        and ch["name"] in str(c.get("channel") or "").split(",")))
            if missed and cell["status"] in ("verified", "not_verified") and cell["advertised"]:
                cell["status"] = "not_verified"
                cell["reasons"].append("the run was interrupted before these checks of it "
                                       f"ran to the end: {', '.join(missed)}")
            cells.append(cell)
        out.append({"channel": ch["name"], "type": ch["type"], "verbs": cells})
    return out


def _one_node_only(results: Sequence[Result], channel: str, verb: str) -> bool:
    """Whether the only checks of ``verb`` on ``channel`` left untested are its concurrency
    checks, for want of a second node, and some check of it passed."""
    rows = [r for r in results if r.channel == channel and r.verb == verb]
    untested = [r for r in rows if r.outcome is Outcome.NOT_TESTED]
    shown = [r for r in rows if r.outcome in (Outcome.PASS, Outcome.XFAIL)]
    return bool(untested) and bool(shown) and all(
        r.id.endswith("_CONCURRENT") and r.message.strip().startswith(ONE_NODE)
        for r in untested)


def _checks_named(checks: Sequence[dict[str, Any]]) -> str:
    """``REBOOT_READBACK on n1@lab, ...`` (at most :data:`MAX_NAMED`, then how many more)."""
    def where(c: dict[str, Any]) -> str:
        if c.get("node") and c.get("channel"):
            return f" on {c['node']}@{c['channel']}"
        return f" on {c.get('node') or c.get('channel')}" if c.get("node") or c.get(
            "channel") else ""

    named = [f"{c['id']}{where(c)}" for c in checks[:MAX_NAMED]]
    more = f" and {len(checks) - MAX_NAMED} more" if len(checks) > MAX_NAMED else ""
    return ", ".join(named) + more


def _interrupted(interruption: dict[str, Any], failed: int) -> tuple[str, list[str]]:
    """(headline, sentences) of a run cut short: what cut it, where, what did not run, and
    whether each machine was put back."""
    not_run = list(interruption.get("not_run", []))
    unfinished = list(interruption.get("not_finished", []))
    total = int(interruption.get("checks_collected") or 0)
    cause = interruption.get("cause") or "interrupted"
    left = len(not_run) + len(unfinished)
    if total == 0:
        headline = f"interrupted ({cause}) before any check ran; not conformant"
    else:
        headline = (f"interrupted ({cause}): {left} of {total} check"
                    f"{'s' if total != 1 else ''} did not run to the end; not conformant")
    sentences = [f"Interrupted during {interruption['during']}."
                 if interruption.get("during") else "Interrupted."]
    if failed:
        sentences.append(f"{failed} check{'s' if failed != 1 else ''} failed before the stop.")
    if unfinished:
        sentences.append(f"Cut before it finished: {_checks_named(unfinished)}.")
    if not_run:
        sentences.append(f"Not run: {_checks_named(not_run)}.")
    back = [m for m in interruption.get("machines", []) if m.get("restored") is True]
    unknown = [m for m in interruption.get("machines", [])
               if m.get("restored") is not True and m.get("restore") == "sent_not_confirmed"]
    not_back = [m for m in interruption.get("machines", [])
                if m.get("restored") is not True and m.get("restore") != "sent_not_confirmed"]
    if back:
        sentences.append("Restored (reads its state at the start): "
                         + ", ".join(f"{m['subject']} ({m['original']})" for m in back) + ".")
    if unknown:
        sentences.append("Restore sent, not confirmed (outcome unknown): " + "; ".join(
            f"{m['subject']} (was {m['original']}): {m.get('detail') or 'not known'}"
            for m in unknown) + ".")
    if not_back:
        sentences.append("NOT restored: " + "; ".join(
            f"{m['subject']}: {m.get('detail') or 'not known'}" for m in not_back) + ".")
    if not interruption.get("machines"):
        sentences.append("No machine was under test yet: nothing to restore.")
    return headline, sentences


def _verdict(
    results: Sequence[Result], matrix: Sequence[dict[str, Any]],
    interruption: dict[str, Any] | None = None,
) -> tuple[str, str, str]:
    """(verdict, headline, reason): pass only when every advertised verb was verified;
    interrupted (never conformant) when the run was cut short, whatever ran before."""
    cells = [(m["channel"], c) for m in matrix for c in m["verbs"]]
    advertised = [(ch, c) for ch, c in cells if c["advertised"]]
    open_ = [(ch, c) for ch, c in cells if c["status"] == "not_verified"]
    untested = [(ch, c) for ch, c in advertised if c["status"] == "not_verified"]
    failed = [r for r in results if r.outcome is Outcome.FAIL]
    sentences: list[str] = []
    if failed:
        more = f" and {len(failed) - 10} more" if len(failed) > 10 else ""
        sentences.append("Failed: " + "; ".join(_failure(r) for r in failed[:10]) + more + ".")
    by_reason: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for ch, c in open_:
        untested_here = [r for r in results if r.channel == ch and r.verb == c["verb"]
                         and r.outcome is Outcome.NOT_TESTED]
        why = tuple(_by_message(untested_here)) if untested_here else tuple(c["reasons"])
        by_reason.setdefault((ch, why), []).append(c["verb"])
    for (ch, reasons), verbs in by_reason.items():
        sentences.append(f"Not verified on {ch}: {', '.join(verbs)}: "
                         f"{'; '.join(reasons) or 'no reason recorded'}.")
    covered = {(ch, c["verb"]) for ch, c in advertised}
    aside = [r for r in results if r.outcome is Outcome.NOT_TESTED
             and (r.channel, r.verb) not in covered]
    xfails = [r for r in results if r.outcome is Outcome.XFAIL]
    one_node = [(ch, c) for ch, c in untested if _one_node_only(results, ch, c["verb"])]
    if interruption is not None:
        verdict = "interrupted"
        headline, said = _interrupted(interruption, len(failed))
        sentences[:0] = said
    elif failed:
        n = len(failed)
        verdict, headline = "fail", f"fail: {n} check{'s' if n != 1 else ''} failed"
    elif not advertised:
        verdict = "incomplete"
        headline = "not verified: no channel under test advertises a verb"
        if not cells:
            sentences.append("No channel was tested.")
    elif untested and len(one_node) == len(untested) == len(open_):
        # every check of every advertised verb passed on its node; only the concurrency
        # checks (every node of a channel at once) had no second node to run on
        verdict, headline = "incomplete", ONE_NODE_HEADLINE
    elif untested:
        verdict = "incomplete"
        headline = (f"not verified: {len(untested) - len(one_node)} of {len(advertised)} "
                    "advertised verbs untested")
        if one_node:
            headline += (f"; {len(one_node)} verified on one node (concurrency not verified: "
                         "one node)")
    elif open_:  # what some node advertises is not known: nothing to call complete
        verdict = "incomplete"
        headline = "not verified: the capabilities of a node under test were not discovered"
    else:
        verdict = "pass"
        headline = (f"pass: every advertised verb verified ({len(advertised)} of "
                    f"{len(advertised)})")
        names: dict[str, list[str]] = {}
        for ch, c in advertised:
            names.setdefault(ch, []).append(c["verb"])
        sentences.append("Every advertised verb has a passing check, none failed and none was "
                         "left untested: " + "; ".join(f"{ch} {', '.join(v)}"
                                                       for ch, v in names.items()) + ".")
    if xfails:
        sentences.append("Declared defects observed (xfail): "
                         + ", ".join(dict.fromkeys(r.id for r in xfails)) + ".")
    if aside:
        sentences.append("Also not tested (checks of no advertised verb): "
                         + "; ".join(_grouped(aside)) + ".")
    return verdict, headline, " ".join(sentences)


def build_results(
    results: Sequence[Result], sessions: Sequence[ConformanceSession],
    interruption: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``results.json`` document: the verdict, its headline and reason, the matrix of
    advertised versus verified verbs per channel, and every check's result.

    ``interruption`` (from :func:`powerplane_conformance.plugin.interruption`): the run was
    cut short; the verdict is ``interrupted`` (never conformant) and the document's
    ``interrupted`` key says by what, during which check, which checks did not run, and
    per machine whether it was put back (``machines``, ``machines_restored``)."""
    from powerplane_conformance._version import __version__

    counts = _tally(results)
    channels = _channels(sessions)
    first = channels[0] if channels else {}
    settings = sessions[0].settings.model_dump(mode="json") if sessions else {}
    matrix = _matrix(results, channels, interruption)
    verdict, headline, reason = _verdict(results, matrix, interruption)
    doc: dict[str, Any] = {
        "suite": {"name": SUITE_NAME, "version": __version__},
        "verdict": verdict,
        "conformant": verdict == "pass",
        "headline": headline,
        "verdict_reason": reason,
        "target": sessions[0].deployment.source if sessions else None,
        "plugin": first.get("plugin"),
        "channel_type": first.get("type"),
        "identity": first.get("identity"),
        "channels": channels,
        "matrix": matrix,
        "settings": settings,
        "counts": counts,
        "results": [r.as_dict() for r in results],
    }
    if interruption is not None:
        doc["interrupted"] = interruption
    return doc


def _verb_rows(data: dict[str, Any]) -> list[str]:
    rows = []
    for m in data.get("matrix", []):
        for c in m["verbs"]:
            shown = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in c["checks"].items() if n)
            result = "FAILED" if c["status"] == "failed" else c["status"].replace("_", " ")
            if c["status"] == "not_advertised":
                result = "-"
            rows.append(f"  {m['channel']:<12} {c['verb']:<10} "
                        f"{'yes' if c['advertised'] else 'no':<11} {result:<13} {shown}".rstrip())
    return rows


def summary_text(data: dict[str, Any]) -> str:
    """A one-screen summary; the first line is the headline (the verdict), the second why."""
    lines = [data["headline"]]
    if data.get("verdict_reason"):
        lines.append(data["verdict_reason"])
    for ch in data.get("channels", []):
        plugin = ch.get("plugin") or {}
        ident = ch.get("identity") or {}
        who = " ".join(str(ident[k]) for k in ("manufacturer", "model", "firmware") if k in ident)
        lines.append(f"channel {ch['name']}: type {ch['type']}, plugin {plugin.get('name')} "
                     f"{plugin.get('version') or ''}".rstrip() + (f", device {who}" if who else ""))
    c = data["counts"]
    lines.append(f"pass {c['pass']}  fail {c['fail']}  skip {c['skip']}  "
                 f"not tested {c['not_tested']}  xfail {c['xfail']}")
    lines.append(f"  {'channel':<12} {'verb':<10} {'advertised':<11} {'result':<13} checks")
    lines += _verb_rows(data)
    order = {"fail": 0, "xfail": 1, "not_tested": 2, "skip": 3}
    notable = sorted((r for r in data["results"]
                      if r["outcome"] in order or r.get("restore_failed")),
                     key=lambda r: order.get(r["outcome"], 4))
    shown = notable[:MAX_ROWS]
    for r in shown:
        where = r["node"] or r["channel"] or ""
        first = (r["message"] or "").strip().splitlines()
        msg = " ".join(x.strip() for x in first[1:] if x.strip()) if r["outcome"] == "fail" \
            and len(first) > 1 else (first[0] if first else "")
        if r.get("restore_failed") and r["outcome"] not in order:
            msg = f"restore failed after the check: {r['restore_failed']}"
        if len(msg) > 150:
            msg = msg[:147] + "..."
        lines.append(f"  {r['outcome'].upper().replace('_', ' '):<10} {r['id']:<26} "
                     f"{where:<12} {msg}")
    if len(notable) > len(shown):
        lines.append(f"  ... {len(notable) - len(shown)} more in the report")
    return "\n".join(lines)
