"""``powerplane maintenance`` at its edges: contradictory flags, arguments that are not text,
a deployment without a ``lifecycle:`` section, a dry run that leaves nothing behind, and
ceremony hints and typed names that say what to type and refuse what does not match."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from lifecycle_support import ceremony, make_config

from powerplane import PowerHost
from powerplane.cli import cli
from powerplane.config import load_config
from powerplane.lifecycle import Ceremony, Lifecycle, Phase, lifecycle_config, open_store
from powerplane.lifecycle.store import InvalidText, Store

WHY = "checked at the rack console"
BLIND = {"faults": {"w1": "lost-answer"}, "timeout_s": 0.05, "boot_marker": False}
FAST = {"settle_window_s": 0.2, "readback_window_s": 0.5}


def write(tmp: Path, cfg: dict[str, Any], name: str = "powerplane.yaml") -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def pp(config: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stdout, result.stderr


def records(config: Path) -> tuple[list[str], list[Any]]:
    """The audit actions and the maintenances' resolutions in the store."""
    deployment = load_config(config)
    store = open_store(lifecycle_config(deployment.lifecycle, deployment.source),
                       deployment.source)
    try:
        return ([a.action.value for a in store.audit()],
                [r for m in store.all() for r in m.spec.resolutions])
    finally:
        store.close()


def awaiting_resolution(tmp: Path) -> Path:
    """A reboot of w1 whose outcome no evidence can tell: parked, awaiting a person."""
    config = write(tmp, make_config(tmp, channel=BLIND, lifecycle=FAST,
                                    cluster={"type": "simulated", "boot_id": False}))

    async def park() -> None:
        async with PowerHost(load_config(config)) as host:
            lc = Lifecycle.for_host(host)
            try:
                m = await lc.request("w1", "reboot", ceremony("w1"))
                await lc.run(until_idle=True)
                assert lc.store.get(m.name).phase is Phase.DRAINED
            finally:
                lc.close()

    asyncio.run(park())
    return config


def test_contradictory_resolve_flags_are_a_usage_error_recording_nothing(
    tmp_path: Path,
) -> None:
    config = awaiting_resolution(tmp_path)
    code, out, err = pp(config, "maintenance", "resolve", "w1", "--applied", "--not-applied",
                        "--reason", WHY, "--confirm-node", "w1")
    assert code == 2, out + err
    assert "Usage" in err and "--applied" in err and "--not-applied" in err
    assert "contradict" in err
    code, _, err = pp(config, "maintenance", "resolve", "w1", "--reason", WHY,
                      "--confirm-node", "w1")
    assert code == 2 and "Usage" in err and "one of --applied or --not-applied" in err
    assert records(config) == (["servers:reboot"], [])
    # one flag is a resolution, recorded once
    code, _, err = pp(config, "maintenance", "resolve", "w1", "--not-applied", "--reason", WHY,
                      "--confirm-node", "w1")
    assert code == 0, err
    actions, resolutions = records(config)
    assert actions == ["servers:reboot", "servers:maintenance-resolve"]
    assert [r.applied for r in resolutions] == [False]


def test_the_awaiting_resolution_hint_is_a_complete_command(tmp_path: Path) -> None:
    config = awaiting_resolution(tmp_path)
    code, out, _ = pp(config, "maintenance", "status", "w1")
    assert code == 0
    hint = next(line for line in out.splitlines() if "AWAITING RESOLUTION" in line)
    assert hint.endswith("powerplane maintenance resolve w1 --applied | --not-applied "
                         "--reason TEXT --confirm-node w1")
    code, out, _ = pp(config, "maintenance", "list")
    assert "--confirm-node w1" in out.replace("\n", "")
    # a wrong typed name says it did not match, and nothing is recorded
    code, _, err = pp(config, "maintenance", "resolve", "w1", "--applied", "--reason", WHY,
                      "--confirm-node", "w2")
    assert code == 2 and "did not match" in err and "--confirm-node w1" in err
    assert records(config) == (["servers:reboot"], [])


def test_a_mismatched_typed_name_on_a_cordon_is_refused_not_ignored(tmp_path: Path) -> None:
    config = write(tmp_path, make_config(tmp_path))
    code, _, err = pp(config, "maintenance", "request", "w1", "--intent", "cordon",
                      "--reason", WHY, "--confirm-node", "w2")
    assert code == 2 and "did not match" in err
    code, out, _ = pp(config, "maintenance", "request", "w1", "--intent", "cordon",
                      "--reason", WHY, "--confirm-node", "w2", "--dry-run", "-o", "json")
    assert '"ceremonyComplete": false' in out
    assert records(config) == ([], [])
    code, _, err = pp(config, "maintenance", "request", "w1", "--intent", "cordon",
                      "--reason", WHY, "--confirm-node", "w1")
    assert code == 0, err


@pytest.mark.parametrize("args", [
    ["status", "\udcff"],
    ["request", "w1", "--intent", "cordon", "--reason", "caf\udce9 upgrade window"],
    ["request", "w1", "--intent", "cordon", "--reason", WHY, "--on-behalf-of", "ren\udce9"],
    ["abandon", "w1", "--reason", "caf\udce9 upgrade window"],
    ["resolve", "w1", "--applied", "--reason", WHY, "--on-behalf-of", "\udce9"],
], ids=["status-node", "request-reason", "request-on-behalf-of", "abandon-reason",
       "resolve-on-behalf-of"])
def test_an_argument_that_is_not_text_is_bad_input_not_a_damaged_store(
    tmp_path: Path, args: list[str]
) -> None:
    config = write(tmp_path, make_config(tmp_path))
    assert pp(config, "maintenance", "list")[0] == 0  # the store exists, healthy
    code, _, err = pp(config, "maintenance", *args)
    assert code == 2, err
    assert "not valid UTF-8" in err and "damaged" not in err
    assert records(config) == ([], [])


def test_real_undecodable_argv_bytes_are_bad_input(tmp_path: Path) -> None:
    config = write(tmp_path, make_config(tmp_path))
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-m", "powerplane.cli", "--config", str(config), "maintenance",
         "status", os.fsdecode(b"\xff")], capture_output=True, env=env, timeout=60)
    assert done.returncode == 2, done.stderr
    assert b"not valid UTF-8" in done.stderr and b"damaged" not in done.stderr


def test_the_store_calls_undecodable_text_bad_input(tmp_path: Path) -> None:
    store = Store(tmp_path / "pp.db")
    try:
        with pytest.raises(InvalidText) as caught:
            store.find("\udcff")
        assert caught.value.exit_code == 2
        assert "damaged" not in str(caught.value)
        assert store.all() == []  # still a healthy store
    finally:
        store.close()


@pytest.mark.parametrize("args", [
    ["list"],
    ["status", "w1"],
    ["request", "w1", "--intent", "cordon", "--reason", WHY],
    ["request", "w1", "--intent", "reboot", "--reason", WHY, "--dry-run"],
    ["abandon", "w1", "--reason", WHY],
    ["run", "--until-idle"],
], ids=["list", "status", "request", "dry-run", "abandon", "run"])
def test_without_a_lifecycle_section_maintenance_says_so_and_creates_nothing(
    tmp_path: Path, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = make_config(tmp_path)
    del cfg["lifecycle"]
    config = write(tmp_path, cfg)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = pp(config, "maintenance", *args)
    assert code == 2, err
    assert "no lifecycle: section" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no powerplane.db


def test_a_dry_run_leaves_no_file_behind(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, channel={"state_file": str(tmp_path / "lab.json")})
    config = write(tmp_path, cfg)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = pp(config, "maintenance", "request", "w1", "--intent", "reboot",
                      "--reason", WHY, "--dry-run")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no store, no lock file


async def test_the_library_records_nothing_for_a_reason_that_is_not_text(
    open_lifecycle: Any,
) -> None:
    lc = await open_lifecycle()
    with pytest.raises(InvalidText) as caught:
        await lc.request("w1", "cordon", Ceremony(reason="caf\udce9 upgrade window"))
    assert caught.value.exit_code == 2 and "damaged" not in str(caught.value)
    assert lc.store.all() == [] and lc.store.audit() == []
    # the store is fine: the same request in text is recorded
    await lc.request("w1", "cordon", Ceremony(reason="cafe upgrade window"))
    assert [a.action.value for a in lc.store.audit()] == ["servers:cordon"]
