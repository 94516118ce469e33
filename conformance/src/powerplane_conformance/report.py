"""``results.json`` and the one-screen summary for people (verdict on the first line)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from powerplane.capabilities import CapabilitySet, Verb
from powerplane_conformance.outcomes import Outcome, Result
from powerplane_conformance.session import ConformanceSession

__all__ = ["SUITE_NAME", "build_results", "summary_text"]

SUITE_NAME = "powerplane-conformance"
MAX_ROWS = 14


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


def build_results(
    results: Sequence[Result], sessions: Sequence[ConformanceSession]
) -> dict[str, Any]:
    """The ``results.json`` document."""
    from powerplane_conformance import __version__

    counts = {o.value: 0 for o in Outcome}
    for r in results:
        counts[r.outcome.value] += 1
    channels = _channels(sessions)
    first = channels[0] if channels else {}
    settings = sessions[0].settings.model_dump(mode="json") if sessions else {}
    return {
        "suite": {"name": SUITE_NAME, "version": __version__},
        "verdict": "fail" if counts["fail"] else "pass",
        "conformant": counts["fail"] == 0,
        "target": sessions[0].deployment.source if sessions else None,
        "plugin": first.get("plugin"),
        "channel_type": first.get("type"),
        "identity": first.get("identity"),
        "channels": channels,
        "settings": settings,
        "counts": counts,
        "results": [r.as_dict() for r in results],
    }


def _verb_rows(data: dict[str, Any]) -> list[str]:
    advertised: dict[str, bool] = {v.value: False for v in Verb}
    for ch in data.get("channels", []):
        for caps in ch.get("capabilities", {}).values():
            for verb in caps.get("verbs", {}):
                advertised[verb] = True
    rows = []
    for verb in advertised:
        tally = {o.value: 0 for o in Outcome}
        for r in data["results"]:
            if r["verb"] == verb:
                tally[r["outcome"]] += 1
        shown = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in tally.items() if n)
        verified = "FAILED" if tally["fail"] else ("verified" if tally["pass"] else "not verified")
        rows.append(f"  {verb:<10} {'yes' if advertised[verb] else 'no':<11} "
                    f"{verified if advertised[verb] else '-':<13} {shown}")
    return rows


def summary_text(data: dict[str, Any]) -> str:
    """A one-screen summary; the first line is the verdict."""
    ok = data["verdict"] == "pass"
    lines = [f"conformant for every advertised verb: {'yes' if ok else 'no'}"]
    for ch in data.get("channels", []):
        plugin = ch.get("plugin") or {}
        ident = ch.get("identity") or {}
        who = " ".join(str(ident[k]) for k in ("manufacturer", "model", "firmware") if k in ident)
        lines.append(f"channel {ch['name']}: type {ch['type']}, plugin {plugin.get('name')} "
                     f"{plugin.get('version') or ''}".rstrip() + (f", device {who}" if who else ""))
    c = data["counts"]
    lines.append(f"pass {c['pass']}  fail {c['fail']}  skip {c['skip']}  "
                 f"not tested {c['not_tested']}  xfail {c['xfail']}")
    lines.append(f"  {'verb':<10} {'advertised':<11} {'result':<13} checks")
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
