from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class Metadata(_message.Message):
    __slots__ = ("hostname", "error", "status")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    error: str
    status: bytes
    def __init__(self, hostname: _Optional[str] = ..., error: _Optional[str] = ..., status: _Optional[bytes] = ...) -> None: ...
