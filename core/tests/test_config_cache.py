"""``powerplane.config_cache``: an unchanged deployment file is neither parsed nor its nodes
validated again; a changed file, roles file or plugin set is; an entry that is not this
user's, not private, or whose HMAC does not verify is never used (it grants nothing); the
folder is 0700, each entry 0600, at most ``MAX_ENTRIES`` of them; a document JSON cannot
carry exactly is not kept; the CLI loads through it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from powerplane import _yaml, config_cache
from powerplane.authority.actions import Action
from powerplane.authority.identity import Identity
from powerplane.cli import cli
from powerplane.config import ProvenNodes, load_config
from powerplane.config_cache import MAX_ENTRIES, cache_folder, load_cached
from powerplane.errors import ConfigError
from powerplane.nodes import NodeSpec
from powerplane.runtime import policy_of


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test's own."""
    home = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv(config_cache.ENV_CACHE, raising=False)
    return home


class Parses:
    """Counts the YAML parses of deployment files."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = _yaml.load_yaml

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(_yaml, "load_yaml", counted)


def deployment(tmp: Path, nodes: int = 3, *, policy: bool = False, extra: str = "") -> Path:
    doc: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated",
                             "machines": {f"m{i}": "on" for i in range(nodes)}}},
        "nodes": {f"n{i}": {"site": "plant-a", "channels": [{"channel": "lab",
                                                             "target": f"m{i}"}]}
                  for i in range(nodes)},
    }
    if policy:
        doc["policy"] = {"type": "local", "file": "roles.yaml"}
        roles(tmp, "admin")
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False) + extra)
    return path


def roles(tmp: Path, tier: str) -> None:
    (tmp / "roles.yaml").write_text(yaml.safe_dump({
        "roles": {"r": {"tier": tier}}, "bindings": [{"role": "r", "users": ["alice"]}]}))


def entries() -> list[Path]:
    return sorted(cache_folder().glob("*.json"))


def test_an_unchanged_file_is_not_parsed_again_and_loads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = deployment(tmp_path, 5)
    parses = Parses(monkeypatch)
    first = load_cached(path)
    assert parses.count == 1 and len(entries()) == 1
    second = load_cached(path)
    assert parses.count == 1  # the kept document: no YAML read
    assert isinstance(second.nodes, ProvenNodes)
    assert list(second.nodes) == list(first.nodes) == [f"n{i}" for i in range(5)]
    assert "n4" in second.nodes and "n9" not in second.nodes and len(second.nodes) == 5
    assert second.nodes["n3"] == first.nodes["n3"] == load_config(path).nodes["n3"]
    assert dict(second.nodes) == dict(first.nodes)
    assert second.channels["lab"].config == first.channels["lab"].config
    assert second.raw == first.raw and second.source == first.source
    with pytest.raises(KeyError):
        second.nodes["n9"]


def test_the_cache_is_private_and_bounded(tmp_path: Path) -> None:
    for i in range(MAX_ENTRIES + 3):
        folder = tmp_path / f"d{i}"
        folder.mkdir()
        load_cached(deployment(folder))
    found = entries()
    assert len(found) == MAX_ENTRIES
    assert cache_folder().stat().st_mode & 0o777 == 0o700
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in [*found, cache_folder() / "key"])


def test_the_entries_together_stay_within_their_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(4):
        folder = tmp_path / f"d{i}"
        folder.mkdir()
        load_cached(deployment(folder, 20))
    size = max(p.stat().st_size for p in entries())
    monkeypatch.setattr(config_cache, "MAX_TOTAL_BYTES", 2 * size)
    folder = tmp_path / "d4"
    folder.mkdir()
    load_cached(deployment(folder, 20))
    assert len(entries()) == 2


def test_a_changed_file_is_validated_again(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = deployment(tmp_path, 2)
    load_cached(path)
    deployment(tmp_path, 3)
    assert list(load_cached(path).nodes) == ["n0", "n1", "n2"]
    path.write_text(path.read_text() + "  n9: {channels: [{channel: nowhere}]}\n")
    with pytest.raises(ConfigError) as caught:
        load_cached(path)
    assert "unknown channel 'nowhere'" in str(caught.value)


def test_a_changed_roles_file_is_read_again(tmp_path: Path) -> None:
    path = deployment(tmp_path, policy=True)
    alice = Identity("alice")

    async def allowed() -> bool:
        policy = policy_of(load_cached(path))
        [decision] = await policy.decide(alice, Action.REBOOT, [("n0", None)])
        return decision.allowed

    import asyncio

    assert asyncio.run(allowed())
    roles(tmp_path, "read")
    assert not asyncio.run(allowed())
    (tmp_path / "roles.yaml").write_text("roles: {r: {tier: admin, allow: [servers:rebot]}}\n")
    with pytest.raises(ConfigError) as caught:
        load_cached(path)
    assert "servers:rebot" in str(caught.value)


def test_a_missing_ca_bundle_of_a_cached_file_is_a_problem_with_its_line(
    tmp_path: Path,
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    path = deployment(tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc["channels"]["bmc"] = {"type": "redfish", "endpoint": "https://127.0.0.1:1",
                              "username": "u", "password": {"env": "PW"}, "verify": str(ca)}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    load_cached(path)
    ca.unlink()
    with pytest.raises(ConfigError) as caught:
        load_cached(path)
    [problem] = caught.value.problems
    assert problem.path == "channels.bmc.verify" and problem.line is not None


def test_a_changed_plugin_set_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from powerplane.plugins import registry

    path = deployment(tmp_path)
    load_cached(path)
    parses = Parses(monkeypatch)
    monkeypatch.setattr(type(registry()), "signature", lambda self: ("another", "plugin set"))
    load_cached(path)
    assert parses.count == 1


def tamper(entry: Path, change: Any) -> None:
    head, mac, key, body = entry.read_bytes().split(b"\n", 3)
    doc = json.loads(body)
    change(doc)
    entry.write_bytes(b"\n".join([head, mac, key, json.dumps(doc).encode()]))


def test_a_tampered_entry_grants_nothing(tmp_path: Path) -> None:
    path = deployment(tmp_path)
    load_cached(path)
    [entry] = entries()

    def hostile(doc: dict[str, Any]) -> None:
        doc["recovery"] = {"attendedRack": True}
        doc["channels"]["lab"]["verbs"] = ["reboot", "shutdown", "power-on", "terminate"]

    tamper(entry, hostile)
    found = load_cached(path)
    assert found.recovery.attended_rack is False
    assert "recovery" not in (found.raw or {})
    assert not isinstance(found.nodes, ProvenNodes)  # validated in full again


def test_an_entry_under_another_key_grants_nothing(tmp_path: Path) -> None:
    path = deployment(tmp_path)
    load_cached(path)
    [entry] = entries()
    secret = cache_folder() / "key"
    body = entry.read_bytes().split(b"\n", 3)
    forged = json.loads(body[3])
    forged["recovery"] = {"attendedRack": True}
    other = b"x" * 32
    raw = json.dumps(forged).encode()
    entry.write_bytes(b"\n".join([body[0], config_cache._mac(other, body[2], raw), body[2], raw]))
    assert secret.read_bytes() != other
    assert load_cached(path).recovery.attended_rack is False


@pytest.mark.parametrize("unsafe", ["folder", "entry", "key", "link"])
def test_an_entry_others_could_have_written_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unsafe: str
) -> None:
    path = deployment(tmp_path)
    load_cached(path)
    [entry] = entries()
    if unsafe == "folder":
        cache_folder().chmod(0o777)
    elif unsafe == "entry":
        entry.chmod(0o644)
    elif unsafe == "key":
        (cache_folder() / "key").chmod(0o640)
    else:
        moved = tmp_path / "elsewhere.json"
        entry.rename(moved)
        entry.symlink_to(moved)
    parses = Parses(monkeypatch)
    found = load_cached(path)
    assert parses.count == 1 and not isinstance(found.nodes, ProvenNodes)


def test_a_document_json_cannot_carry_is_not_kept(tmp_path: Path) -> None:
    path = deployment(tmp_path)
    path.write_text(path.read_text().replace("  n0:", "  1234:", 1))  # an integer key
    assert "1234" in load_cached(path).nodes
    assert entries() == []
    assert not config_cache._plain({"at": __import__("datetime").date(2026, 12, 6)})
    assert not config_cache._plain({"x": float("nan")})
    assert config_cache._plain({"a": [1, 2.5, True, None, "x", {"b": {}}]})


def test_the_cache_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config_cache.ENV_CACHE, "off")
    path = deployment(tmp_path)
    load_cached(path)
    load_cached(path)
    assert entries() == []


def test_an_entry_holds_no_secret_value(tmp_path: Path) -> None:
    path = deployment(tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc["channels"]["bmc"] = {"type": "redfish", "endpoint": "https://127.0.0.1:1",
                              "username": "u", "password": {"env": "BMC_PASSWORD"},
                              "verify": False}
    path.write_text(yaml.safe_dump(doc))
    found = load_cached(path)
    assert not any(config_cache.plain_secret(c) for c in found.channels.values())
    [entry] = entries()
    assert b'"password":{"env":"BMC_PASSWORD"}' in entry.read_bytes()


def test_a_proven_node_is_validated_on_first_use_only(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = deployment(tmp_path, 50)
    load_cached(path)
    found = load_cached(path)
    assert isinstance(found.nodes, ProvenNodes)
    seen = found.nodes["n7"]
    assert isinstance(seen, NodeSpec) and found.nodes["n7"] is seen
    assert found.nodes._done.keys() == {"n7"}


def test_the_cli_loads_through_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = deployment(tmp_path)
    runner = CliRunner()
    out = runner.invoke(cli, ["--config", str(path), "state", "n1", "-o", "json"])
    assert out.exit_code == 0, out.output
    assert len(entries()) == 1
    parses = Parses(monkeypatch)
    again = runner.invoke(cli, ["--config", str(path), "state", "n1", "-o", "json"])
    assert again.exit_code == 0 and json.loads(again.output) == json.loads(out.output)
    assert parses.count == 0


def test_the_key_does_not_move_as_plugin_hooks_run(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from powerplane.plugins import load_plugins

    path = deployment(tmp_path)
    fresh = load_plugins()
    load_cached(path, fresh)  # resolves the simulated type's hooks
    parses = Parses(monkeypatch)
    load_cached(path, fresh)
    load_cached(path, load_plugins())  # another process's registry, nothing resolved yet
    assert parses.count == 0
