"""Optional parts of the plugin contract are declared: a config model's check_limits
(channel.ChecksLimits, a protocol found with isinstance and run at load), and a plugin
module's REGISTERS (hookspecs.Registers, the shape the registry reads)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from powerplane.channel import ChecksLimits


class _Checked(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    wait_s: float = 1.0

    def check_limits(self, timeout_s: float) -> list[tuple[str, str]]:
        return [("wait_s", "too long")] if self.wait_s >= timeout_s else []


class _Plain(BaseModel):
    wait_s: float = 1.0


def test_a_config_model_with_check_limits_is_a_checks_limits() -> None:
    assert isinstance(_Checked(), ChecksLimits)
    assert not isinstance(_Plain(), ChecksLimits)
    checked: ChecksLimits = _Checked(wait_s=5)  # the protocol types the contract
    assert checked.check_limits(2) == [("wait_s", "too long")]


def test_the_loader_runs_a_declared_check_limits() -> None:
    from powerplane.config import _limit_problems

    problems = _limit_problems(_Checked(wait_s=5), 2.0, ("channels", "w"), {})
    assert [(p.path, p.message) for p in problems] == [("channels.w.wait_s", "too long")]
    assert _limit_problems(_Plain(), 2.0, ("channels", "w"), {}) == []


def test_registers_is_the_declared_shape_the_registry_reads() -> None:
    """The contract's ``Registers`` keys are exactly the kinds the registry accepts, and
    every in-tree plugin module (and core's built-ins) declares a value of that shape."""
    import importlib
    import typing

    from powerplane import Registers, plugins
    from powerplane.hookspecs import Registers as declared

    assert Registers is declared
    kinds = set(typing.get_type_hints(Registers))
    assert kinds == set(plugins._KINDS)
    modules = ["powerplane.builtins", "powerplane_redfish.plugin", "powerplane_talos.plugin",
               "powerplane_pdu.plugin", "powerplane_cloud.plugin", "powerplane_ipmi.plugin",
               "powerplane_kubernetes.plugin"]
    for name in modules:
        module = importlib.import_module(name)
        value = module.REGISTERS
        assert set(value) <= kinds, name
        assert module.__annotations__["REGISTERS"] in ("Registers", Registers), name
        assert plugins._declared_names(value) is not None, name
