from . import common_pb2 as _common_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RebootRequest(_message.Message):
    __slots__ = ("mode",)
    class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DEFAULT: _ClassVar[RebootRequest.Mode]
        POWERCYCLE: _ClassVar[RebootRequest.Mode]
        FORCE: _ClassVar[RebootRequest.Mode]
    DEFAULT: RebootRequest.Mode
    POWERCYCLE: RebootRequest.Mode
    FORCE: RebootRequest.Mode
    MODE_FIELD_NUMBER: _ClassVar[int]
    mode: RebootRequest.Mode
    def __init__(self, mode: _Optional[_Union[RebootRequest.Mode, str]] = ...) -> None: ...

class Reboot(_message.Message):
    __slots__ = ("metadata", "actor_id")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    actor_id: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., actor_id: _Optional[str] = ...) -> None: ...

class RebootResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Reboot]
    def __init__(self, messages: _Optional[_Iterable[_Union[Reboot, _Mapping]]] = ...) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ("force",)
    FORCE_FIELD_NUMBER: _ClassVar[int]
    force: bool
    def __init__(self, force: _Optional[bool] = ...) -> None: ...

class Shutdown(_message.Message):
    __slots__ = ("metadata", "actor_id")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    actor_id: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., actor_id: _Optional[str] = ...) -> None: ...

class ShutdownResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Shutdown]
    def __init__(self, messages: _Optional[_Iterable[_Union[Shutdown, _Mapping]]] = ...) -> None: ...

class Version(_message.Message):
    __slots__ = ("metadata", "version", "platform", "features")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    version: VersionInfo
    platform: PlatformInfo
    features: FeaturesInfo
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., version: _Optional[_Union[VersionInfo, _Mapping]] = ..., platform: _Optional[_Union[PlatformInfo, _Mapping]] = ..., features: _Optional[_Union[FeaturesInfo, _Mapping]] = ...) -> None: ...

class VersionResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Version]
    def __init__(self, messages: _Optional[_Iterable[_Union[Version, _Mapping]]] = ...) -> None: ...

class VersionInfo(_message.Message):
    __slots__ = ("tag", "sha", "built", "go_version", "os", "arch")
    TAG_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    BUILT_FIELD_NUMBER: _ClassVar[int]
    GO_VERSION_FIELD_NUMBER: _ClassVar[int]
    OS_FIELD_NUMBER: _ClassVar[int]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    tag: str
    sha: str
    built: str
    go_version: str
    os: str
    arch: str
    def __init__(self, tag: _Optional[str] = ..., sha: _Optional[str] = ..., built: _Optional[str] = ..., go_version: _Optional[str] = ..., os: _Optional[str] = ..., arch: _Optional[str] = ...) -> None: ...

class PlatformInfo(_message.Message):
    __slots__ = ("name", "mode")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    name: str
    mode: str
    def __init__(self, name: _Optional[str] = ..., mode: _Optional[str] = ...) -> None: ...

class FeaturesInfo(_message.Message):
    __slots__ = ("rbac",)
    RBAC_FIELD_NUMBER: _ClassVar[int]
    rbac: bool
    def __init__(self, rbac: _Optional[bool] = ...) -> None: ...

class SystemStatResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[SystemStat]
    def __init__(self, messages: _Optional[_Iterable[_Union[SystemStat, _Mapping]]] = ...) -> None: ...

class SystemStat(_message.Message):
    __slots__ = ("metadata", "boot_time")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    BOOT_TIME_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    boot_time: int
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., boot_time: _Optional[int] = ...) -> None: ...
