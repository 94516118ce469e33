"""The one exception hierarchy of powerplane, every distribution's classes in one drawing.

Each class with its CLI exit code and where it lives when not here (a test fails when an
installed distribution defines a ``PowerplaneError`` subclass this drawing lacks)::

    PowerplaneError                       1  base of every error powerplane raises on purpose
    ├── ConfigError                       2  a bad deployment file or channel config (path, line)
    │   └── SecretError                   2  a secret reference that cannot be resolved (names it)
    ├── PluginLoadError                   1  a plugin failed to import or to register
    ├── UnknownNode                       2  a node name the deployment does not define
    ├── UnknownPeer                       2  demo --only names no offered peer (powerplane_demo)
    ├── NotOffered                        3  the recoverability rule withholds the verb (reason)
    ├── NotSupported                      3  a verb the channel does not advertise (no I/O)
    ├── PolicyDenied                      3  the policy denies this identity the action (rule)
    ├── AuditNotRecorded                  1  the act's audit record is not durable: not performed
    ├── ChannelError                      1  a channel or its device failed (channel, target)
    │   ├── Unreachable                   1  connection refused, DNS failure, no route
    │   ├── AuthenticationFailed          1  credentials or client certificate rejected
    │   ├── ChannelTimeout                1  no answer in time; a verb: nothing was sent
    │   ├── OutcomeUnknown                1  sent, no answer: it may have been applied
    │   ├── RefusedByDevice               1  the device refused (in its own words)
    │   ├── TLSVerificationFailed         1  the certificate did not verify against the CA
    │   └── ProtocolError                 1  an answer the channel cannot interpret
    └── LifecycleError                    1  the lifecycle refused or failed (powerplane.lifecycle)
        ├── CeremonyRequired              2  incomplete ceremony; nothing recorded (.ceremony)
        │   └── HazardReasonRequired      2  last of the quorum margin, no hazard reason (.guard)
        ├── MaintenanceRefused            3  a safety rule refuses the request (.ceremony)
        │   └── GuardRefused              3  the guard refuses a direct verb call (.guard)
        ├── AlreadyActive                 2  the node has an active maintenance (.store)
        ├── InvalidText                   2  a value that is not UTF-8 text: bad input (.store)
        ├── NotFound                      2  no such maintenance, or none for the node (.store)
        │   ├── NotReturnable             2  only a parked maintenance returns (.service)
        │   └── NotResolvable             2  only an awaited dispatch is resolved (.service)
        ├── ConcurrentChange              1  kept changing under other writers: try again (.store)
        ├── LedgerConflict                1  that attempt is in the ledger: not sent (.ledger)
        ├── StoreError                    1  the store cannot be opened, read or written (.store)
        │   └── KubernetesStoreError      1  the API server unusable as the store (kubernetes)
        ├── StorageError                  1  the storage system refused or failed (.storage)
        ├── InvalidTransition             1  not in the phase graph: a bug (.phases)
        └── PortError                     1  a cluster or storage port failed (.ports)
            ├── TemporaryPortError        1  it may pass: tried again next pass (.ports)
            │   └── PolicyUnavailable     1  no SubjectAccessReview answer now (kubernetes)
            └── PermanentPortError        1  it will not pass: the maintenance fails (.ports)

Every plugin maps its library's exceptions into the ``ChannelError`` branch with
``raise Mapped(...) from exc``; a plugin defines no error classes of its own.

The one rule for HTTP status codes, every plugin's (each plugin's mapping test checks it):

* 401, 403 -> ``AuthenticationFailed``;
* other 4xx -> ``RefusedByDevice``, with the device's own message;
* 5xx -> ``RefusedByDevice``: the device, or the service in front of it, answered and said
  it did not complete the request. Something answered, so it is not ``Unreachable``; and a
  person reading "refused" with the device's words knows to look at the device. Except:
* a state-changing request whose connection dropped, or whose answer did not come in
  time, after it was written -> ``OutcomeUnknown`` (it may have been applied), whatever
  the status of any earlier attempt.

A plugin applies the rule with :func:`status_error` (the class of a 400 to 599 status)
and tells a failed certificate verification with :func:`is_tls_failure`; none keeps a copy
of either (``core/tests/test_one_status_rule.py``). No message
built here or by a plugin may contain a secret value. The store's optimistic-concurrency
signal (``powerplane.lifecycle.store._Conflict``) is not an error of this tree: the
lifecycle retries on it and never shows it to a person.

CLI exit codes: 0 done; 1 a channel or device failed, the outcome is unknown, a plugin did
not load, or the lifecycle could not record (``ChannelError``, ``PluginLoadError``,
``ConcurrentChange``, ``StoreError``, ``StorageError``, ``PortError``); 2 bad input
(``ConfigError``, ``UnknownNode``, ``UnknownPeer``, ``CeremonyRequired``,
``AlreadyActive``, ``NotFound``); 3 refused by the rule (``NotOffered``, ``NotSupported``,
``MaintenanceRefused``, ``PolicyDenied``). A refusal carries its cause for JSON: ``rule``
(the recoverability rule), ``guard`` (a lifecycle safety rule) or ``policy`` (who may act).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "AuditNotRecorded",
    "AuthenticationFailed",
    "ChannelError",
    "ChannelTimeout",
    "ConfigError",
    "ConfigProblem",
    "LifecycleError",
    "NotOffered",
    "NotSupported",
    "OutcomeUnknown",
    "PluginLoadError",
    "PolicyDenied",
    "PowerplaneError",
    "ProtocolError",
    "RefusedByDevice",
    "SecretError",
    "TLSVerificationFailed",
    "UnknownNode",
    "Unreachable",
    "is_tls_failure",
    "status_error",
]

CERTIFICATE_WORDS = ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed")
"""How OpenSSL words a failed certificate verification (its code and its reason), as the
libraries that wrap its error repeat it in their own messages."""


class PowerplaneError(Exception):
    """Base of every error powerplane raises on purpose."""

    exit_code: int = 1


@dataclass(frozen=True)
class ConfigProblem:
    """One problem in a config: where (dotted path, line when known) and what was expected."""

    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = self.path or "(top level)"
        if self.line is not None:
            where = f"{where} (line {self.line})"
        return f"{where}: {self.message}"


class ConfigError(PowerplaneError):
    """A bad deployment file: one or more problems, each naming its path."""

    exit_code = 2

    def __init__(
        self,
        problems: Sequence[ConfigProblem] | str,
        *,
        source: str | None = None,
    ) -> None:
        if isinstance(problems, str):
            problems = [ConfigProblem("", problems)]
        self.problems: tuple[ConfigProblem, ...] = tuple(problems)
        self.source = source
        head = f"invalid config {source}" if source else "invalid config"
        lines = [f"{head}: {len(self.problems)} problem(s)"]
        lines += [f"  {p}" for p in self.problems]
        super().__init__("\n".join(lines))


class SecretError(ConfigError):
    """A secret reference that cannot be resolved; names the reference, never a value."""


class PluginLoadError(PowerplaneError):
    """A plugin that failed to import, or raised while registering."""

    def __init__(self, plugin: str, error: str) -> None:
        self.plugin = plugin
        self.error = error
        super().__init__(f"plugin {plugin!r} failed to load: {error}")


class UnknownNode(PowerplaneError):
    """A node name the deployment does not define."""

    exit_code = 2

    def __init__(self, node: str, known: Sequence[str] = ()) -> None:
        self.node = node
        hint = f"; known nodes: {', '.join(sorted(known)[:20])}" if known else ""
        super().__init__(f"unknown node {node!r}{hint}")


class NotOffered(PowerplaneError):
    """The recoverability rule withholds this verb for this node."""

    exit_code = 3
    cause = "rule"

    def __init__(self, node: str, verb: str, reason: str) -> None:
        self.node = node
        self.verb = verb
        self.reason = reason
        super().__init__(f"{verb} not offered for {node}: {reason}")


class NotSupported(PowerplaneError):
    """A channel was asked for a verb it does not advertise; raised before any I/O."""

    exit_code = 3
    cause = "rule"

    def __init__(self, channel: str, verb: str, detail: str = "") -> None:
        self.channel = channel
        self.verb = verb
        extra = f" ({detail})" if detail else ""
        super().__init__(f"channel {channel!r} does not advertise {verb}{extra}")


class PolicyDenied(PowerplaneError):
    """The deployment's policy does not allow this identity the action on the node.

    ``decision`` is the :class:`powerplane.authority.Decision` with the rule that decided
    it. A denial is never upgraded by any ceremony, and nothing was sent or recorded but
    the denial itself.
    """

    exit_code = 3
    cause = "policy"

    def __init__(self, message: str, decision: object = None) -> None:
        self.decision = decision
        super().__init__(message)


class AuditNotRecorded(PowerplaneError):
    """The act's audit record could not be made durable, so the act was not performed.

    Nothing was sent and nothing was recorded: an act is carried out only once its record
    is durable.
    """

    exit_code = 1


class ChannelError(PowerplaneError):
    """A channel or its device failed. Carries the channel name and the target."""

    exit_code = 1

    def __init__(self, message: str, *, channel: str = "", target: object = None) -> None:
        self.channel = channel
        self.target = target
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        parts = []
        if self.channel:
            parts.append(f"channel {self.channel!r}")
        if self.target not in (None, ""):
            parts.append(f"target {self.target}")
        prefix = f"{', '.join(parts)}: " if parts else ""
        return f"{prefix}{self.message}"


class Unreachable(ChannelError):
    """Connection refused, DNS failure, or no route: the device could not be reached."""


class AuthenticationFailed(ChannelError):
    """The device rejected the credentials or the client certificate."""


class ChannelTimeout(ChannelError):
    """No answer within the bound. For a verb: only when the request never left.

    A timeout after a state-changing request was written is :class:`OutcomeUnknown`.
    """


class OutcomeUnknown(ChannelError):
    """The request was sent (or may have been) and no answer came: it may have been applied.

    Never a plain failure: retrying could apply the verb twice. The lifecycle settles
    such a dispatch by evidence (boot marker, power readback) or asks a person.
    """

    def __init__(self, message: str = "", *, channel: str = "", target: object = None) -> None:
        text = "outcome unknown: the request was sent and may have been applied"
        super().__init__(f"{text} ({message})" if message else text, channel=channel,
                         target=target)


class RefusedByDevice(ChannelError):
    """The device answered and refused the request; the message carries the device's words."""


class TLSVerificationFailed(ChannelError):
    """The device's TLS certificate did not verify against the configured CA."""


class ProtocolError(ChannelError):
    """The device answered something the channel cannot interpret."""


class LifecycleError(PowerplaneError):
    """The maintenance lifecycle refused a request or could not carry it out.

    Its subclasses live in :mod:`powerplane.lifecycle` (drawn above with their exit codes).
    """

    exit_code = 1


def status_error(status: int) -> type[ChannelError]:
    """The class of an HTTP error status, by the one rule (the module docstring): 401 and
    403 :class:`AuthenticationFailed`, any other 400 to 599 :class:`RefusedByDevice`.
    ``ValueError`` for a status that is no error (a caller decides what that means)."""
    if isinstance(status, bool) or not 400 <= status <= 599:
        raise ValueError(f"HTTP {status} is not an error status")
    return AuthenticationFailed if status in (401, 403) else RefusedByDevice


def is_tls_failure(exc: BaseException) -> bool:
    """Whether ``exc``, or an exception it was raised from or during, is a failed
    verification of the peer's certificate: ``ssl.SSLCertVerificationError``, or an error
    whose message carries OpenSSL's words for it (:data:`CERTIFICATE_WORDS`: httpx,
    urllib3 and requests wrap the ``ssl`` error in their own)."""
    import ssl  # loaded by then if an SSL error is in the chain; not at import time

    seen: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and link not in seen:
        if isinstance(link, ssl.SSLCertVerificationError):
            return True
        text = str(link)
        if any(word in text for word in CERTIFICATE_WORDS):
            return True
        seen.append(link)
        link = link.__cause__ or link.__context__
    return False
