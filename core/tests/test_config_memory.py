"""Reading the config file is bounded in memory and never blocks on a file that is not one.

* A file's kind and size are checked before a byte is read: a FIFO, a directory, a
  character device (``/dev/zero``) or a socket is exit 2 at once, naming what it is; a file
  over :data:`~powerplane._yaml.MAX_BYTES` is refused unread.
* A control character YAML refuses (NUL and the other C0 codes but tab, line feed and
  carriage return) is found in the bytes, before the text is decoded or parsed: a 200 MB
  NUL-filled file peaks under its own size plus 100 MB (it peaked at about four times
  its size, 794 to 857 MB, when the text was decoded, measured, copied for libyaml and
  copied again for the line of the error).
* Reading any file holds at most its bytes and its text at once: a 200 MB file of comments
  peaks under twice its size plus 100 MB (the documented bound).

Each peak is the child process's own high-water mark (``VmHWM`` in ``/proc/self/status``):
an explicit memory bound, not a timing. Not ``ru_maxrss``: Linux carries it across
``execve`` from the process that spawned the child, so a child of a large test worker would
report the worker's peak.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from powerplane._yaml import MAX_BYTES
from powerplane.config import read_config
from powerplane.errors import ConfigError

MB = 1_000_000
HEADROOM = 100 * MB
BIG = 200 * MB

PEAK = """
import sys
from powerplane.config import load_config
from powerplane.errors import ConfigError
try:
    load_config(sys.argv[1])
except ConfigError as exc:
    print(exc, file=sys.stderr)
    code = 2
else:
    code = 0
with open("/proc/self/status") as status:
    hwm = next(line for line in status if line.startswith("VmHWM:"))
print(int(hwm.split()[1]) * 1024)
sys.exit(code)
"""


def _peak(path: Path) -> tuple[int, int, str]:
    """(exit code, peak resident bytes, stderr) of a child that loads ``path``."""
    res = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True,
                         text=True, timeout=120, check=False)
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, int(res.stdout.strip()), res.stderr


def test_a_200_mb_nul_filled_file_is_refused_under_its_size_plus_100_mb(
    tmp_path: Path,
) -> None:
    path = tmp_path / "nul.yaml"
    with open(path, "wb") as handle:  # zeros: a sparse file, read as 200 MB of NULs
        handle.truncate(BIG)
    code, peak, err = _peak(path)
    assert code == 2, err
    assert "(line 1): YAML error: control characters are not allowed (U+0000 at byte 0)" \
        in err
    assert peak < BIG + HEADROOM, f"peak {peak / MB:.0f} MB"


def test_a_control_character_is_named_with_its_line_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "bell.yaml"
    path.write_bytes(b"nodes:\n  n1: {site: 'a\x07b'}\n")
    with pytest.raises(ConfigError) as info:
        read_config(path)
    assert str(info.value.problems[0]) == (
        "(top level) (line 2): YAML error: control characters are not allowed "
        "(U+0007 at byte 22)")


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as handle:
        handle.truncate(MAX_BYTES + 1)
    code, peak, err = _peak(path)
    assert code == 2, err
    assert f"the file is larger than {MAX_BYTES} bytes (256 MiB)" in err
    assert peak < HEADROOM, f"peak {peak / MB:.0f} MB"  # the interpreter, not the file


def test_any_file_is_read_holding_at_most_its_bytes_and_its_text(tmp_path: Path) -> None:
    path = tmp_path / "comments.yaml"
    line = b"# " + b"c" * 77 + b"\n"
    with open(path, "wb") as handle:
        for _ in range(BIG // (len(line) * 10_000)):
            handle.write(line * 10_000)
    size = path.stat().st_size
    code, peak, err = _peak(path)
    assert code == 0, err
    assert peak < 2 * size + HEADROOM, f"peak {peak / MB:.0f} MB for {size / MB:.0f} MB"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "powerplane.cli", *args],
                          capture_output=True, text=True, timeout=30, check=False)


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "powerplane.yaml"
    os.mkfifo(fifo)
    res = _cli("--config", str(fifo), "state", "n1")  # blocked forever before
    assert res.returncode == 2, res.stderr
    assert f"config file {fifo} is a FIFO (named pipe), not a regular file" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_character_device_is_refused_at_once(tmp_path: Path) -> None:
    res = _cli("--config", "/dev/zero", "offers")
    assert res.returncode == 2, res.stderr
    assert "config file /dev/zero is a character device, not a regular file" in res.stderr


def test_a_directory_and_a_socket_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory, not a regular file"):
        read_config(tmp_path)
    where = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(where))
        with pytest.raises(ConfigError, match="is a socket, not a regular file"):
            read_config(where)


def test_a_symlink_to_a_regular_file_is_read(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    real.write_text("nodes: {n1: {}}\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    data, _, _ = read_config(link)
    assert data == {"nodes": {"n1": {}}}


def test_the_documents_state_the_size_limit_of_the_code() -> None:
    root = Path(__file__).resolve().parents[2]
    figure = f"{MAX_BYTES // 2**20} MiB"
    assert MAX_BYTES == 256 * 2**20
    reference = "\n".join(p.read_text(encoding="utf-8")
                          for p in sorted((root / "docs" / "reference").glob("*.md")))
    for doc, text in (("README.md", (root / "README.md").read_text(encoding="utf-8")),
                      ("docs/reference", reference)):
        assert f"files over {figure}" in text, doc
        assert "1 MB" not in text, doc  # the old, wrong figure
        assert "at most 512 MiB" in text, doc  # the memory bound beside it
    assert f"{MAX_BYTES:,} bytes" in (root / "docs/reference/deployment-file.md").read_text(
        encoding="utf-8")
