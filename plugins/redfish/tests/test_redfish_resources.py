"""The declared Redfish resources: absent means none (never all), a body that does not fit is
a ProtocolError naming the resource and the property, no read of sushy's private parts."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from powerplane import ProtocolError, parse_config
from powerplane_redfish import (
    ActionInfo,
    ComputerSystem,
    Manager,
    RedfishChannel,
    ResetAction,
    channel,
    connection,
    errors,
    mapping,
    resources,
)
from powerplane_redfish.testing.mockup import MockupServer

MockupFn = Callable[..., MockupServer]
CfgFn = Callable[..., dict[str, Any]]


def channel_for(cfg: dict[str, Any]) -> RedfishChannel:
    configured = parse_config({"channels": {"bmc": cfg}}).channels["bmc"]
    ch = configured.type.factory("bmc", configured.config)
    assert isinstance(ch, RedfishChannel)
    return ch


# -- absent means none, never all ----------------------------------------------------------------
def test_a_reset_action_without_values_advertises_none_not_all() -> None:
    system = ComputerSystem.model_validate(
        {"Actions": {"#ComputerSystem.Reset": {"target": "/x/Actions/ComputerSystem.Reset"}}})
    assert system.actions.reset is not None
    assert system.actions.reset.allowable_values is None
    assert system.actions.reset.action_info is None
    assert ComputerSystem.model_validate({}).actions.reset is None
    assert ComputerSystem.model_validate({}).power_state is None
    assert ComputerSystem.model_validate({}).links.managed_by == []


def test_action_info_without_a_reset_type_parameter_lists_none() -> None:
    assert ActionInfo.model_validate({}).reset_types() is None
    assert ActionInfo.model_validate(
        {"Parameters": [{"Name": "ResetType", "Required": True}]}).reset_types() is None
    info = ActionInfo.model_validate(
        {"Parameters": [{"Name": "Other", "AllowableValues": ["X"]},
                        {"Name": "ResetType", "AllowableValues": ["On", "ForceOff"]}]})
    assert info.reset_types() == ["On", "ForceOff"]


def test_every_field_has_its_docstring() -> None:
    for model in (ComputerSystem, ResetAction, ActionInfo, Manager, resources.BootProgress,
                  resources.SystemActions, resources.SystemLinks, resources.ODataRef,
                  resources.ActionParameter):
        assert issubclass(model, BaseModel)
        tree = ast.parse(inspect.getsource(model))
        body = tree.body[0]
        assert isinstance(body, ast.ClassDef)
        documented = {
            stmt.target.id
            for stmt, after in zip(body.body, body.body[1:], strict=False)
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
        }
        assert set(model.model_fields) == documented, model


def test_a_body_that_does_not_fit_names_the_resource_and_the_property() -> None:
    with pytest.raises(resources.InvalidResource) as err:
        resources.parse(ComputerSystem, {"PowerState": 5, "Actions": []}, "/redfish/v1/S/1")
    text = str(err.value)
    assert "/redfish/v1/S/1 is not a valid ComputerSystem" in text
    assert "PowerState" in text and "Actions" in text
    assert "5" not in text.replace("v1/S/1", "")  # the device's values are not repeated


# -- through the channel -------------------------------------------------------------------------
async def test_a_power_state_that_is_not_a_string_is_a_protocol_error(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server))
    try:
        assert ch.read_power_state(target).state.value == "on"
        server.power[target] = 5  # type: ignore[assignment]  # what a broken BMC serves
        with pytest.raises(ProtocolError, match=r"not a valid ComputerSystem \(PowerState"):
            ch.read_power_state(target)
    finally:
        ch.close()


async def test_actions_that_are_not_an_object_are_a_protocol_error_not_no_reset(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    server.http.resource(target)["Actions"] = ["#ComputerSystem.Reset"]
    ch = channel_for(mockup_cfg(server))
    try:
        with pytest.raises(ProtocolError, match="Actions"):
            ch.capabilities(target)
        assert server.reset_log() == []
    finally:
        ch.close()


async def test_an_action_info_that_does_not_fit_is_a_protocol_error(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-bladed", advertise="action-info")
    target = server.systems[0]
    server.http.set_resource(f"{target}/ResetActionInfo", {"Parameters": {"Name": "x"}})
    ch = channel_for(mockup_cfg(server))
    try:
        with pytest.raises(ProtocolError, match="not a valid ActionInfo"):
            ch.capabilities(target)
    finally:
        ch.close()


# -- no reads of sushy's private attributes ------------------------------------------------------
def test_the_plugin_reads_no_private_attribute_of_another_object() -> None:
    """``x._name`` only where ``x`` is ``self`` and ``_name`` is the plugin's own (set in
    its own class); never sushy's (``root._auth``, ``connector._session``)."""
    for module in (channel, connection, errors, mapping, resources):
        tree = ast.parse(inspect.getsource(module))
        own: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                own.add(node.name)
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute):
                own.add(node.target.attr)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and len(node.args) > 1):
                name = node.args[1]
                assert not (isinstance(name, ast.Constant) and str(name.value).startswith("_")), (
                    f"{module.__name__}:{node.lineno} reads {ast.unparse(node)}")
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__"):
                continue
            assert isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"), (
                f"{module.__name__}:{node.lineno} reads {ast.unparse(node)}")
            assert node.attr in own, f"{module.__name__}:{node.lineno} reads {node.attr}"
