"""The processes a demo peer leaves running: read from ``/proc`` (or ``ps``), never signalled.

``--keep`` prints them, with one ``kill`` command a person can run; the demo itself stops
every peer by the handle its ``start`` returned.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["descendants", "process_table"]

def process_table() -> dict[int, tuple[int, str]]:
    """``pid -> (parent pid, state letter)`` of every process visible here."""
    table: dict[int, tuple[int, str]] = {}
    proc = Path("/proc")
    if proc.is_dir() and (proc / "self" / "stat").exists():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            rest = stat[stat.rfind(")") + 1:].split()
            if len(rest) >= 2 and rest[1].isdigit():
                table[int(entry.name)] = (int(rest[1]), rest[0])
        return table
    try:
        out = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,stat="], capture_output=True,
                             text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return table
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            table[int(parts[0])] = (int(parts[1]), parts[2][:1])
    return table


def descendants(roots: set[int], table: dict[int, tuple[int, str]] | None = None) -> set[int]:
    """Every live (not zombie) process below ``roots``."""
    table = process_table() if table is None else table
    kids: dict[int, list[int]] = {}
    for pid, (ppid, state) in table.items():
        if state != "Z":
            kids.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in kids.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found
