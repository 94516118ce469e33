"""Secret references: ``{env: NAME}`` or ``{file: PATH}``, resolved at use, never shown.

A config never holds a secret value, only where to find it. :class:`SecretRef`
validates that the reference exists when the config is loaded (so a missing file
is a config error naming its path) and reads the value only in :meth:`reveal`.
Its ``repr`` and ``str`` name the reference, never the value.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from powerplane.errors import SecretError

__all__ = ["SecretRef"]


class SecretRef(BaseModel):
    """Where a secret lives: exactly one of ``env`` (a variable name) or ``file`` (a path)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    env: str | None = None
    """Name of an environment variable holding the secret."""
    file: str | None = None
    """Path of a file holding the secret (surrounding whitespace is stripped)."""

    @model_validator(mode="before")
    @classmethod
    def _reject_inline(cls, data: Any) -> Any:
        if isinstance(data, SecretRef):
            return data
        if not isinstance(data, dict):
            raise ValueError(
                "expected a secret reference {env: NAME} or {file: PATH}; "
                "inline secret values are not accepted"
            )
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretRef:
        if (self.env is None) == (self.file is None):
            raise ValueError("expected exactly one of 'env' or 'file'")
        if self.env is not None and self.env not in os.environ:
            raise ValueError(f"environment variable {self.env!r} is not set")
        if self.file is not None and not Path(self.file).expanduser().is_file():
            raise ValueError(f"secret file {self.file!r} does not exist")
        return self

    def reveal(self) -> str:
        """Read the secret now. Raises :class:`SecretError` naming the reference, never a value."""
        if self.env is not None:
            value = os.environ.get(self.env)
            if value is None:
                raise SecretError(f"secret {self}: environment variable is not set")
            return value
        assert self.file is not None
        try:
            return Path(self.file).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SecretError(f"secret {self}: cannot read file ({exc.strerror})") from None

    def __str__(self) -> str:
        return f"{{env: {self.env}}}" if self.env is not None else f"{{file: {self.file}}}"

    def __repr__(self) -> str:
        return f"SecretRef({self})"
