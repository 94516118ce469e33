"""The ``{k8s: NAMESPACE/NAME/KEY}`` secret reference kind: registered by the entry point,
checked for shape at load without a request, resolved at use by one GET of the Secret
(the environment's API access: KUBECONFIG here), and never shown: not in the config's
forms, not in an error, not in the CLI's output."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from powerplane import ConfigError, SecretError, SecretRef, parse_config
from powerplane.cli import cli
from powerplane.secrets import SECRET_KINDS
from powerplane.testing import plugin_registry
from powerplane_kubernetes import plugin
from powerplane_kubernetes.secrets import parse
from powerplane_kubernetes.testing.apiserver import KubeApiServer

SECRET = "s3cr3t-Pa55w0rd-k8s"
OTHER = "another-value-never-shown"


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        server.add_secret("powerplane-system", "bmc-credentials",
                          {"password": SECRET + "\n", "username": OTHER})
        monkeypatch.setenv("KUBECONFIG", str(server.write_kubeconfig(tmp_path / "kc")))
        yield server


def _channel(password: Any, **extra: Any) -> dict[str, Any]:
    return {"channels": {"lab": {"type": "simulated", "machines": {"m": "on"},
                                 "password": password, **extra}},
            "nodes": {"n1": {"channels": [{"channel": "lab", "target": "m"}]}}}


def _secret_reads(api: KubeApiServer) -> list[str]:
    return [str(r) for r in api.requests if "/secrets" in r.path]


def test_the_entry_point_registers_the_k8s_kind() -> None:
    assert plugin_registry().secret_kinds["k8s"] is plugin.K8S


@pytest.mark.parametrize(("value", "words"), [
    ("ns/name", "is not NAMESPACE/NAME/KEY"),
    ("ns/name/key/more", "is not NAMESPACE/NAME/KEY"),
    ("Bad_NS/name/key", "namespace 'Bad_NS' is not a Kubernetes namespace name"),
    ("ns/Name!/key", "Secret name 'Name!' is not a Kubernetes object name"),
    ("ns/name/a key", "key 'a key' is not a Secret key"),
])
def test_a_bad_reference_is_a_config_error_at_load_naming_the_path(
        api: KubeApiServer, value: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_channel({"k8s": value}))
    (problem,) = err.value.problems
    assert problem.path == "channels.lab.password"
    assert words in problem.message
    assert _secret_reads(api) == []  # checked without the network


def test_resolved_at_use_only_and_never_in_any_form(api: KubeApiServer) -> None:
    dep = parse_config(_channel({"k8s": "powerplane-system/bmc-credentials/password"}))
    ref = dep.channels["lab"].config.password  # type: ignore[attr-defined]
    assert isinstance(ref, SecretRef)
    assert _secret_reads(api) == []  # loading read nothing
    for shown in (repr(ref), str(ref), str(ref.model_dump()), ref.model_dump_json(),
                  repr(dep.channels["lab"].config)):
        assert SECRET not in shown
    assert str(ref) == "{k8s: powerplane-system/bmc-credentials/password}"
    assert ref.reveal() == SECRET  # decoded, the trailing line break dropped
    assert _secret_reads(api) == [
        "GET /api/v1/namespaces/powerplane-system/secrets/bmc-credentials"]


@pytest.mark.parametrize(("value", "message"), [
    ("powerplane-system/missing/password",
     "secret {k8s: powerplane-system/missing/password}: no Secret missing in namespace "
     "powerplane-system"),
    ("powerplane-system/bmc-credentials/token",
     "secret {k8s: powerplane-system/bmc-credentials/token}: the Secret "
     "powerplane-system/bmc-credentials has no key token"),
])
def test_a_missing_secret_or_key_names_the_reference_only(
        api: KubeApiServer, value: str, message: str) -> None:
    with pytest.raises(SecretError) as err:
        SecretRef.model_validate({"k8s": value}, context={SECRET_KINDS: plugin_registry()}
                                 ).reveal()
    text = str(err.value)
    assert message in text
    assert SECRET not in text and OTHER not in text
    assert err.value.__cause__ is None


def test_no_api_access_is_a_secret_error(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(SecretError, match="no Kubernetes API access"):
        SecretRef.model_validate({"k8s": "ns/name/key"},
                                 context={SECRET_KINDS: plugin_registry()}).reveal()


def test_a_channel_authenticates_with_it_and_the_output_never_shows_it(
        api: KubeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIM_EXPECT", SECRET)
    good = _channel({"k8s": "powerplane-system/bmc-credentials/password"},
                    expect_password={"env": "SIM_EXPECT"})
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(good), encoding="utf-8")
    res = CliRunner().invoke(cli, ["--config", str(tmp_path / "good.yaml"), "state", "n1",
                                   "-o", "json"])
    assert res.exit_code == 0, res.output
    assert SECRET not in res.output
    assert _secret_reads(api)  # read when the channel was used
    wrong = _channel({"k8s": "powerplane-system/bmc-credentials/username"},
                     expect_password={"env": "SIM_EXPECT"})
    (tmp_path / "wrong.yaml").write_text(yaml.safe_dump(wrong), encoding="utf-8")
    res = CliRunner().invoke(cli, ["--config", str(tmp_path / "wrong.yaml"), "state", "n1"])
    assert res.exit_code == 1, res.output
    assert SECRET not in res.output and OTHER not in res.output


def test_parse_gives_the_three_parts() -> None:
    assert parse("ns/my.secret/tls.key") == ("ns", "my.secret", "tls.key")
