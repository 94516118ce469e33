"""Who is asking: an identity the platform established, never one a requester typed.

Three platforms establish one: the local process (:func:`local_identity`: the effective
OS user and its groups, read from the process's credentials, never from ``$USER`` or
``$LOGNAME``), the Kubernetes API server (the requester's authenticated ``userInfo``), and
the HTTP surface (a verified token). ``on_behalf_of`` is free text a requester may add; it
is recorded beside the identity and authorizes nothing.
"""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass

__all__ = ["Identity", "local_identity"]


@dataclass(frozen=True, slots=True)
class Identity:
    """An authenticated requester: user, groups, and the platform that vouched for them."""

    user: str
    groups: tuple[str, ...] = ()
    via: str = "local"
    """Who authenticated it: ``local`` (the OS), ``kubernetes`` (the API server), ``oidc``."""
    on_behalf_of: str | None = None
    """Text the requester added ("for the night shift"): recorded, never authorizes."""

    def describe(self) -> str:
        """``user alice (groups: plant-eng, wheel)``."""
        groups = f" (groups: {', '.join(self.groups)})" if self.groups else " (no groups)"
        return f"user {self.user}{groups}"


def local_identity() -> Identity:
    """The identity of this process: its effective user and groups, by the OS's account
    database (an id with no name is ``uid:N`` / ``gid:N``)."""
    uid = os.geteuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = f"uid:{uid}"
    gids = [os.getegid(), *os.getgroups()]
    names: list[str] = []
    for gid in dict.fromkeys(gids):
        try:
            names.append(grp.getgrgid(gid).gr_name)
        except KeyError:
            names.append(f"gid:{gid}")
    return Identity(user=user, groups=tuple(names), via="local")
