"""The generated Talos API subset matches Talos's machine.proto on the wire, and error mapping.

Field numbers, types and method paths are checked against what Talos's own
``api/machine/machine.proto`` and ``api/common/common.proto`` declare.
"""

from __future__ import annotations

import ssl

import h2.exceptions
import pytest
from google.protobuf.descriptor import FieldDescriptor
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
)
from powerplane_talos._generated import common_pb2, machine_pb2
from powerplane_talos._generated.machine_grpc import MachineServiceStub
from powerplane_talos.errors import map_error

F = FieldDescriptor


def fields(message: type) -> dict[str, tuple[int, int, bool]]:
    return {f.name: (f.number, f.type, f.is_repeated)
            for f in message.DESCRIPTOR.fields}  # type: ignore[attr-defined]


def test_messages_have_talos_field_numbers_and_types() -> None:
    assert machine_pb2.DESCRIPTOR.package == "machine"
    assert common_pb2.DESCRIPTOR.package == "common"
    assert fields(machine_pb2.RebootRequest) == {"mode": (1, F.TYPE_ENUM, False)}
    assert dict(machine_pb2.RebootRequest.Mode.items()) == {
        "DEFAULT": 0, "POWERCYCLE": 1, "FORCE": 2}
    assert fields(machine_pb2.ShutdownRequest) == {"force": (1, F.TYPE_BOOL, False)}
    for reply in (machine_pb2.Reboot, machine_pb2.Shutdown):
        assert fields(reply) == {"metadata": (1, F.TYPE_MESSAGE, False),
                                 "actor_id": (2, F.TYPE_STRING, False)}
    for wrapper in (machine_pb2.RebootResponse, machine_pb2.ShutdownResponse,
                    machine_pb2.VersionResponse, machine_pb2.SystemStatResponse):
        assert fields(wrapper) == {"messages": (1, F.TYPE_MESSAGE, True)}
    assert fields(machine_pb2.Version)["version"] == (2, F.TYPE_MESSAGE, False)
    assert fields(machine_pb2.VersionInfo)["tag"] == (1, F.TYPE_STRING, False)
    # Talos's SystemStat, subset: metadata = 1, uint64 boot_time = 2 (fields 3-12 left out)
    assert fields(machine_pb2.SystemStat) == {"metadata": (1, F.TYPE_MESSAGE, False),
                                              "boot_time": (2, F.TYPE_UINT64, False)}
    meta = fields(common_pb2.Metadata)
    assert meta["hostname"] == (1, F.TYPE_STRING, False)
    assert meta["error"] == (2, F.TYPE_STRING, False)
    # Talos declares status as google.rpc.Status: a message, length-delimited like bytes.
    assert meta["status"][0] == 3


def test_method_paths_are_talos_paths() -> None:
    service = machine_pb2.DESCRIPTOR.services_by_name["MachineService"]
    assert service.full_name == "machine.MachineService"
    assert {m.name for m in service.methods} == {"Reboot", "Shutdown", "Version",
                                                  "SystemStat"}
    stat = service.methods_by_name["SystemStat"]
    assert stat.input_type.full_name == "google.protobuf.Empty"
    assert stat.output_type.full_name == "machine.SystemStatResponse"
    stub = MachineServiceStub.__init__.__code__.co_consts
    assert "/machine.MachineService/Reboot" in stub
    assert "/machine.MachineService/SystemStat" in stub


def _ssl_error(reason: str) -> ssl.SSLError:
    err = ssl.SSLError(1, reason)
    err.reason = reason  # type: ignore[misc]
    return err


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (GRPCError(Status.UNAVAILABLE, "down"), Unreachable),
        (GRPCError(Status.UNAUTHENTICATED, "who"), AuthenticationFailed),
        (GRPCError(Status.PERMISSION_DENIED, "no"), AuthenticationFailed),
        (GRPCError(Status.DEADLINE_EXCEEDED, "late"), ChannelTimeout),
        (GRPCError(Status.FAILED_PRECONDITION, "busy"), RefusedByDevice),
        (GRPCError(Status.INTERNAL, "oops"), RefusedByDevice),
        (TimeoutError(), ChannelTimeout),
        (ssl.SSLCertVerificationError(1, "certificate verify failed"), TLSVerificationFailed),
        (_ssl_error("TLSV1_ALERT_UNKNOWN_CA"), AuthenticationFailed),
        (_ssl_error("TLSV13_ALERT_CERTIFICATE_REQUIRED"), AuthenticationFailed),
        (_ssl_error("WRONG_VERSION_NUMBER"), TLSVerificationFailed),
        (ConnectionRefusedError(111, "refused"), Unreachable),
        (ConnectionResetError(104, "reset"), Unreachable),
        (StreamTerminatedError("Connection lost"), Unreachable),
        (OSError(113, "No route to host"), Unreachable),
        (h2.exceptions.ProtocolError("bad frame"), ProtocolError),
        (RuntimeError("weird"), ProtocolError),
    ],
)
def test_every_library_failure_maps_into_the_hierarchy(
    exc: BaseException, expected: type[ChannelError]
) -> None:
    err = map_error(exc, channel="talos", target="10.0.0.11", endpoint="127.0.0.1:50000",
                    timeout=5)
    assert type(err) is expected
    assert err.channel == "talos" and err.target == "10.0.0.11"


def test_committed_generated_modules_are_what_the_script_generates() -> None:
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("grpc_tools")
    script = Path(__file__).resolve().parents[1] / "scripts/generate_protos.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
