"""Copies of the trail for an inspector (21 CFR Part 11 § 11.10(b): accurate and complete
copies in human-readable and electronic form): ``powerplane audit export``.

``jsonl``: every entry as stored, one per line, chain fields and checkpoints included, so
the copy verifies on its own (the lines are the canonical encodings). ``csv``: one row per
record, the record's fields, then ``seq`` and the chain hash. ``html``: a printable,
self-contained page (no script, no remote resource): on its first page the trail it came
from, when it was made, and the verification (intact or the first bad entry and why, the
signed checkpoints, the head to keep); then every record in a table, times in UTC.
"""

from __future__ import annotations

import csv
import datetime as dt
import html
import io
from collections.abc import Sequence

from powerplane.authority.chain import Entry, Verdict

__all__ = ["FIELDS", "export"]

FIELDS = ("seq", "at", "actor", "groups", "via", "onBehalfOf", "recordedBy", "action",
          "outcome", "node", "maintenance", "reason", "rule", "detail", "source", "prev",
          "hash")
"""The columns of the CSV copy (and the HTML table's, in fewer words)."""


def _value(entry: Entry, key: str) -> str:
    if key == "hash":
        return entry.hash
    value = (entry.doc or {}).get(key)
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def export(fmt: str, entries: Sequence[Entry], verdict: Verdict, trail: str) -> str:
    """The trail in ``fmt`` (``jsonl``, ``csv``, ``html``)."""
    if fmt == "jsonl":
        return "".join(e.raw.decode("utf-8", "replace") + "\n" for e in entries)
    records = [e for e in entries if e.doc is not None and not e.is_checkpoint]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(FIELDS)
        for e in records:
            writer.writerow([_value(e, k) for k in FIELDS])
        return out.getvalue()
    return _html(entries, records, verdict, trail)


_STYLE = """
body { font: 10pt/1.35 "DejaVu Sans", Arial, sans-serif; margin: 1.5cm; color: #111; }
h1 { font-size: 16pt; margin: 0 0 .3em; }
.verdict { border: 2px solid #333; padding: .6em .9em; margin: 1em 0 1.5em; }
.intact { border-color: #1b6e2a; } .broken { border-color: #a4161a; }
.verdict strong { font-size: 12pt; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dt { font-weight: bold; } dd { margin: 0; word-break: break-all; }
table { border-collapse: collapse; width: 100%; font-size: 8.5pt; }
th, td { border: 1px solid #999; padding: .2em .35em; text-align: left;
         vertical-align: top; }
th { background: #eee; } tr { break-inside: avoid; }
.records { break-before: page; }
code { font-family: "DejaVu Sans Mono", monospace; font-size: 8pt; }
@page { size: A4 landscape; margin: 1.2cm; }
"""


def _html(entries: Sequence[Entry], records: Sequence[Entry], verdict: Verdict,
          trail: str) -> str:
    esc = html.escape
    made = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if verdict.intact:
        headline = "The trail verifies: every record is chained to the one before it."
        cls = "intact"
    else:
        headline = (f"The trail does NOT verify: entry {verdict.first_bad}: "
                    f"{verdict.problem}")
        cls = "broken"
    seal = ("not checked: no signing key was given" if not verdict.sealed else
            f"{verdict.checkpoints} signed checkpoint(s) verified; {verdict.unsealed} "
            "record(s) after the last one")
    facts = [
        ("Trail", trail), ("Copy made (UTC)", made), ("Records", str(verdict.records)),
        ("Entries", str(len(entries))), ("Signed checkpoints", seal),
        ("Head (keep it: the next verify's --expect-head)", verdict.head or "(empty)"),
    ]
    rows = []
    for e in records:
        d = e.doc or {}
        who = esc(str(d.get("actor", "")))
        if d.get("onBehalfOf"):
            who += f" (for {esc(str(d['onBehalfOf']))})"
        if d.get("recordedBy"):
            who += f"<br>recorded by {esc(str(d['recordedBy']))}"
        rows.append(
            "<tr>" + "".join(f"<td>{x}</td>" for x in (
                esc(_value(e, "seq")), esc(_value(e, "at")), who,
                esc(_value(e, "via")), esc(_value(e, "action")), esc(_value(e, "outcome")),
                esc(_value(e, "node")), esc(_value(e, "maintenance")),
                esc(_value(e, "reason")), esc(_value(e, "rule")), esc(_value(e, "detail")),
                f"<code>{esc(e.hash[:16])}</code>")) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in (
        "#", "at (UTC)", "actor", "via", "action", "outcome", "node", "maintenance",
        "reason", "rule", "detail", "hash"))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>powerplane audit trail</title><style>{_STYLE}</style></head><body>"
        "<h1>powerplane audit trail: a copy for inspection</h1>"
        f"<div class=\"verdict {cls}\"><strong>{esc(headline)}</strong></div>"
        "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts) + "</dl>"
        "<p>Each record carries the SHA-256 of the record before it (its <code>prev</code>);"
        " <code>powerplane audit verify</code> recomputes every one. See the reference, "
        "\"Audit records: the chained trail\", for what the chain and the signed "
        "checkpoints prove.</p>"
        f"<section class=\"records\"><h2>Records ({len(records)})</h2>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "</section></body></html>\n")
