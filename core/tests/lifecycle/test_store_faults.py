"""A lifecycle store that cannot be used: a clear error naming the file and the cause, exit 1.

Each fault runs the real CLI in a child process, bounded by resource limits on that process
(address space, CPU) and an explicit timeout on the call; nothing here measures the code.
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lifecycle_support import make_config

from powerplane.errors import ConfigError
from powerplane.lifecycle import Store
from powerplane.settings.lifecycle import lifecycle_config

CALL_TIMEOUT_S = 60
"""The explicit bound on one CLI call (a lock must fail long before it)."""


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    resource.setrlimit(resource.RLIMIT_CPU, (30, 30))


PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
CAP_DAC_OVERRIDE, CAP_FOWNER = 1, 3


def _bound_by_mode_bits() -> None:
    """In the child, before it executes: ``_limits``, and for root, the capabilities that
    let it write through mode bits (``CAP_DAC_OVERRIDE``, ``CAP_FOWNER``) dropped from the
    bounding set (and no ambient ones), so the executed process is held by a file's mode
    bits as its owner is. It keeps ``CAP_DAC_READ_SEARCH``: it still reads the checkout and
    the interpreter wherever they are, whatever their modes (the same user, the same
    files; nothing depends on where the checkout lives)."""
    _limits()
    if os.geteuid() != 0:
        return  # mode bits already bind every other user
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # none: EINVAL is fine
    for cap in (CAP_DAC_OVERRIDE, CAP_FOWNER):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap})")


def pp(
    config: Path, *args: str, mode_bits_bind: bool = False
) -> subprocess.CompletedProcess[str]:
    """The CLI in a child; ``mode_bits_bind``: held by mode bits even when run as root."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERPLANE_")}
    return subprocess.run(
        [sys.executable, "-m", "powerplane.cli", "--config", str(config), "maintenance", *args],
        capture_output=True, text=True, timeout=CALL_TIMEOUT_S, env=env, cwd=config.parent,
        preexec_fn=_bound_by_mode_bits if mode_bits_bind else _limits, check=False,
    )


def _writable_in_a_child(path: Path) -> str:
    """What a child held by mode bits (as ``pp(mode_bits_bind=True)``) gets when it opens
    ``path`` for writing and creates a file beside it: ``"denied"`` for both, else what
    it could do (so the read-only condition is checked, not assumed, also as root)."""
    probe = ("import sys\n"
             "from pathlib import Path\n"
             "p = Path(sys.argv[1]); said = []\n"
             "for act in (lambda: open(p, 'r+b').close(),\n"
             "            lambda: open(p.parent / 'probe-wal', 'xb').close()):\n"
             "    try:\n"
             "        act(); said.append('written')\n"
             "    except PermissionError:\n"
             "        said.append('denied')\n"
             "print(' '.join(sorted(set(said))))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True,
                          text=True, timeout=CALL_TIMEOUT_S, preexec_fn=_bound_by_mode_bits,
                          check=True)
    return done.stdout.strip()


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory every user may read (a child may run as another user)."""
    path = Path(tempfile.mkdtemp(prefix="pp-store-"))
    path.chmod(0o755)
    yield path
    for p in [path, *path.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
        elif not p.is_symlink():
            p.chmod(0o644)
    shutil.rmtree(path)


def write_config(place: Path, store: str, **lifecycle: Any) -> Path:
    cfg = make_config(place, lifecycle={"store": store, **lifecycle})
    path = place / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    path.chmod(0o644)
    return path


def assert_clear(res: subprocess.CompletedProcess[str], store: Path, cause: str) -> None:
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr + res.stdout
    assert str(store) in res.stderr
    assert cause in res.stderr, res.stderr


def _valid_store(path: Path) -> None:
    Store(path).close()


def corrupt(place: Path) -> tuple[Path, str]:
    path = place / "store.db"
    path.write_bytes(os.urandom(4096))
    return path, "not a usable SQLite database"


def bad_header(place: Path) -> tuple[Path, str]:
    path = place / "store.db"
    _valid_store(path)
    body = bytearray(path.read_bytes())
    body[16:24] = b"\xff" * 8  # page size and format bytes no SQLite writes
    path.write_bytes(bytes(body))
    for extra in ("-wal", "-shm"):
        Path(f"{path}{extra}").unlink(missing_ok=True)
    return path, "not a usable SQLite database"


def directory(place: Path) -> tuple[Path, str]:
    path = place / "store.db"
    path.mkdir()
    return path, "is a directory"


def under_a_file(place: Path) -> tuple[Path, str]:
    (place / "plain").write_text("a regular file", encoding="utf-8")
    return place / "plain" / "store.db", "cannot be created"


FAULTS = {"corrupt": corrupt, "bad-header": bad_header, "directory": directory,
          "under-a-regular-file": under_a_file}


@pytest.mark.parametrize("command", [("list",), ("status", "w1"), ("run", "--until-idle")])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_broken_store_is_a_clear_error(place: Path, fault: str, command: tuple[str, ...]) -> None:
    store, cause = FAULTS[fault](place)
    config = write_config(place, str(store))
    assert_clear(pp(config, *command), store, cause)


def test_a_broken_store_refuses_a_request_clearly(place: Path) -> None:
    store, cause = corrupt(place)
    config = write_config(place, str(store))
    res = pp(config, "request", "w1", "--intent", "cordon", "--reason", "rack move today")
    assert_clear(res, store, cause)


def test_a_read_only_store_is_a_clear_error(place: Path) -> None:
    store = place / "state" / "store.db"
    store.parent.mkdir()
    _valid_store(store)
    for p in store.parent.iterdir():
        p.chmod(0o444)
    store.parent.chmod(0o555)
    config = write_config(place, str(store))
    # the child is the same user (root keeps reading everything, but its mode bits bind
    # it): the store and its directory are read-only to it, checked, not assumed
    assert _writable_in_a_child(store) == "denied"
    res = pp(config, "list", mode_bits_bind=True)
    assert_clear(res, store, "read-only")


@pytest.fixture
def locked(place: Path) -> Iterator[tuple[Path, Path]]:
    """A store another connection holds exclusively (readers and writers both wait)."""
    store = place / "store.db"
    _valid_store(store)
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO audit (at, actor, action, reason, node, maintenance, source, "
                   "detail) VALUES ('', '', '', '', '', '', '', '')")
    config = write_config(place, str(store), busy_timeout_s=0.2)
    yield store, config
    holder.execute("ROLLBACK")
    holder.close()


@pytest.mark.parametrize("command", [
    ("list",),
    ("request", "w1", "--intent", "cordon", "--reason", "rack move today"),
    ("run", "--until-idle"),
])
def test_a_locked_store_fails_within_the_busy_timeout(
    locked: tuple[Path, Path], command: tuple[str, ...]
) -> None:
    store, config = locked
    res = pp(config, *command)
    assert_clear(res, store, "database is locked")
    assert "busy_timeout_s = 0.2 s" in res.stderr


def test_a_write_lock_fails_a_request_within_the_busy_timeout(place: Path) -> None:
    """In WAL mode readers pass a writer; a second writer waits, then fails clearly."""
    store = place / "store.db"
    _valid_store(store)
    config = write_config(place, str(store), busy_timeout_s=0.2)
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert pp(config, "list").returncode == 0
        res = pp(config, "request", "w1", "--intent", "cordon", "--reason", "rack move today")
        assert_clear(res, store, "database is locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert pp(config, "list", "-o", "json").stdout.count('"name"') == 0  # nothing recorded


def test_the_busy_timeout_is_configurable_and_defaults_to_5_s(tmp_path: Path) -> None:
    assert lifecycle_config({}).busy_timeout_s == 5
    store = Store(tmp_path / "a.db")
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    store.close()
    store = Store(tmp_path / "b.db", lifecycle_config({"busy_timeout_s": 0.25}).busy_timeout_s)
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == 250
    store.close()
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match=r"lifecycle\.busy_timeout_s"):
            lifecycle_config({"busy_timeout_s": bad})


def test_the_store_file_mode_is_untouched_by_a_fault(place: Path) -> None:
    """A failed open leaves a corrupt file as it found it (nothing rewritten)."""
    store, _ = corrupt(place)
    before = store.read_bytes()
    config = write_config(place, str(store))
    assert pp(config, "list").returncode == 1
    assert store.read_bytes() == before
    assert stat.S_ISREG(store.stat().st_mode)
