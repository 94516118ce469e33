"""A switched PDU that refuses to switch an outlet into the state it is in: read back, done.

The answer is an SNMP SET answered with an error status at the outlet's control object,
the status a field report captured from an APC AP8965 writing ``sPDUOutletCtl``
(``RequestFailedError: GeneralError: 1.3.6.1.4.1.318.1.1.4.4.2.1.3.10``, status 5, genErr;
phillipsnick/apc-pdu-snmp issue 18) and RFC 3416's ``inconsistentValue`` ("could under
other circumstances be assigned"), served by snmpsim with the ``pduoutlet`` variation
module's ``already=STATUS`` (a SET that would not change the outlet is answered with that
status and changes nothing). The host reads the node back through the same channel: when it
reads the state the verb leads to, the verb is done, quoting the PDU's refusal; otherwise the
refusal stands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from powerplane import InvokeResult, PowerHost, PowerState, RefusedByDevice, parse_config
from powerplane_pdu import PduChannel, parse_target


def _deployment(channel: dict[str, Any], outlets: list[int]) -> dict[str, Any]:
    return {"channels": {"rack": {"type": "pdu", **channel}},
            "nodes": {"n1": {"channels": [{"channel": "rack",
                                           "target": {"outlets": outlets}}]}}}


async def test_shutdown_of_an_outlet_off_refused_with_generr_is_read_back_and_done(
        snmp_config: Callable[..., dict[str, Any]],
        channel_for: Callable[..., PduChannel]) -> None:
    cfg = _deployment(snmp_config("already-ms"), [3])  # outlet 3 starts off
    async with PowerHost(parse_config(cfg)) as host:
        result = await host.invoke("n1", "shutdown", reason="already off")
    assert isinstance(result, InvokeResult), result
    assert result.readback is PowerState.OFF
    assert result.detail.startswith("already off: the device refused shutdown (")
    assert "SNMP set refused: genErr at 1.3.6.1.4.1.318.1.1.4.4.2.1.3.3" in result.detail
    assert result.detail.endswith("and a readback confirmed off")
    # the PDU itself refuses the same write: not the channel deciding on its own
    ch = channel_for(snmp_config("already-ms"))
    with pytest.raises(RefusedByDevice, match="SNMP set refused: genErr"):
        await ch.shutdown(parse_target({"outlets": [4]}))


async def test_power_on_refused_with_inconsistent_value_at_an_outlet_on_is_done(
        snmp_config: Callable[..., dict[str, Any]],
        channel_for: Callable[..., PduChannel]) -> None:
    # outlet 2 is on, 3 off: the one SET for both is refused at outlet 2, outlet 3 is
    # switched on alone, and the node reads on: done, saying what the PDU answered
    cfg = _deployment(snmp_config("already-rpdu2"), [2, 3])
    async with PowerHost(parse_config(cfg)) as host:
        result = await host.invoke("n1", "power-on", reason="already on, half")
    assert isinstance(result, InvokeResult), result
    assert result.readback is PowerState.ON
    assert result.detail.startswith("already on: the device refused power-on (")
    assert "SNMP set refused: inconsistentValue" in result.detail
    assert "rack/3: switched on" in result.detail
    reading = await channel_for(snmp_config("already-rpdu2")).read_power_state(
        parse_target({"outlets": [2, 3]}))
    assert reading.state is PowerState.ON


async def test_a_refusal_the_readback_does_not_confirm_stands(
        snmp_config: Callable[..., dict[str, Any]]) -> None:
    # outlets 1 (on) and 4 (off) shut down: 4 is refused as already off, 1 switched off;
    # then the node reads off and the shutdown is done -- but a power-on of [1, 4] now
    # (both off) is carried out, never "already"
    cfg = _deployment(snmp_config("already-rpdu2"), [1, 4])
    async with PowerHost(parse_config(cfg)) as host:
        off = await host.invoke("n1", "shutdown", reason="mixed")
        on = await host.invoke("n1", "power-on", reason="both off now")
    assert isinstance(off, InvokeResult) and off.readback is PowerState.OFF
    assert off.detail.startswith("already off: the device refused shutdown (")
    assert isinstance(on, InvokeResult), on
    assert not on.detail.startswith("already"), on.detail
