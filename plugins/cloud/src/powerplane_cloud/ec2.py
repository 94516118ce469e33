"""The ``ec2`` channel: Amazon EC2 through boto3.

==========  ==========================  ==========================================
verb        API call                    notes
==========  ==========================  ==========================================
reboot      ``RebootInstances``         graceful (the OS is asked to restart)
shutdown    ``StopInstances``           graceful (the OS is asked to shut down)
power-on    ``StartInstances``          refused here for a terminated instance
terminate   ``TerminateInstances``      offered by core only for replaceable nodes
readback    ``DescribeInstanceStatus``  running on, stopped off, terminated off
==========  ==========================  ==========================================

Every verb reads the instances first (one ``DescribeInstanceStatus`` per batch), so that
an unknown id is an error naming that id, a verb the instance's state cannot take
(start a terminated instance) is refused per instance before anything is sent, and
a verb whose end state is already reached (start a running instance) is accepted
without a call.
``invoke_batch`` acts on up to ``batch_size`` instances per API call; results stay
per instance. ``capabilities_batch`` discovers many instances with one ``DescribeInstances``
per 1,000 ids (the instance-id filter, 1,000 results a page, following ``NextToken``).
Throttled reads and idempotent writes (stop, start, terminate) are retried with backoff;
a reboot is never repeated. botocore's own retries are off.
Each attempt of a verb's call passes :func:`powerplane.about_to_send` right before it
leaves; a timeout or a dropped connection after that is :class:`~powerplane.OutcomeUnknown`
(:mod:`powerplane_cloud.errors`).

No boot marker: :meth:`EC2Channel.boot_marker` is always None (why: its docstring).

boto3 is imported when the first client is built, never at plugin discovery.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from powerplane import (
    Acceptance,
    Backoff,
    CapabilitySet,
    ChannelError,
    PowerplaneError,
    Reading,
    RefusedByDevice,
    Source,
    Verb,
    about_to_send,
    require,
)
from powerplane_cloud.config import EC2Config
from powerplane_cloud.errors import (
    NOT_FOUND_CODES,
    error_code,
    is_throttle,
    map_client_error,
    map_error,
)

__all__ = ["EC2Channel", "reading_for_state"]

_CAPS = CapabilitySet.of(
    graceful=[Verb.REBOOT, Verb.SHUTDOWN, Verb.TERMINATE],
    hard=[Verb.POWER_ON],
    source=Source.INTRINSIC,
    detail="EC2 API: RebootInstances, StopInstances, StartInstances, TerminateInstances",
)


@dataclass(frozen=True)
class _Op:
    operation: str
    """The boto3 client method."""
    response_key: str | None
    """Where the per-instance state changes are in the response (reboot returns none)."""
    idempotent: bool
    """Whether repeating it leaves the same end state (then throttling is retried)."""


_OPS = {
    Verb.REBOOT: _Op("reboot_instances", None, idempotent=False),
    Verb.SHUTDOWN: _Op("stop_instances", "StoppingInstances", idempotent=True),
    Verb.POWER_ON: _Op("start_instances", "StartingInstances", idempotent=True),
    Verb.TERMINATE: _Op("terminate_instances", "TerminatingInstances", idempotent=True),
}

_ALREADY = {
    ("terminated", Verb.TERMINATE): "already terminated",
    ("running", Verb.POWER_ON): "already running",
    ("stopped", Verb.SHUTDOWN): "already stopped",
}
"""Verbs whose end state the instance is already in: accepted, nothing is sent."""

_TRANSITIONS = frozenset({"pending", "stopping", "shutting-down"})

DESCRIBE_IDS = 1000
"""Instance ids per ``DescribeInstances`` call when many are discovered together: EC2's
guidance is at most 1,000 ids in one describe call, and a page holds at most 1,000
results (``MaxResults`` 5 to 1,000); further pages follow ``NextToken``."""


def reading_for_state(state: str) -> Reading:
    """The reading for an EC2 instance state name."""
    if state == "running":
        return Reading.on()
    if state == "stopped":
        return Reading.off()
    if state == "terminated":
        return Reading.off("terminated")
    if state in _TRANSITIONS:
        return Reading.unknown(f"in transition ({state})")
    return Reading.unknown(f"unrecognised instance state {state!r}")


def _refusal(verb: Verb, instance: str, state: str) -> str | None:
    """Why ``verb`` cannot be sent to an instance in ``state`` (None: it can)."""
    gone = state in ("terminated", "shutting-down")
    if verb is Verb.POWER_ON:
        if gone:
            return f"instance {instance} is {state}: a terminated instance cannot be started"
        if state == "stopping":
            return f"instance {instance} is stopping: it can be started once stopped"
    if verb is Verb.SHUTDOWN and gone:
        return f"instance {instance} is {state}: there is nothing to stop"
    if verb is Verb.REBOOT:
        if gone:
            return f"instance {instance} is {state}: there is nothing to reboot"
        if state in ("stopped", "stopping"):
            return f"instance {instance} is {state}: only a running instance can be rebooted"
    return None


def _caps_for(instance: str, state: str) -> CapabilitySet:
    """What the API offers an instance in ``state``: nothing once it is (being) terminated."""
    if state in ("terminated", "shutting-down"):
        return CapabilitySet.empty(f"instance {instance} is {state}", Source.DISCOVERED)
    return _CAPS


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


Outcome = Acceptance | PowerplaneError


def _quiet_botocore() -> None:
    """Keep botocore's DEBUG records out of the logs unless the embedder chose a level.

    At DEBUG botocore logs request headers (the access key id, a session token) and
    response bodies (an STS answer holds temporary secret keys): no secret may reach a
    log line. A level the embedder set on ``botocore`` or ``boto3`` is left alone.
    """
    for name in ("botocore", "boto3"):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)


class EC2Channel:
    """One EC2 account (or assumed role) in one region."""

    def __init__(self, name: str, config: EC2Config) -> None:
        self.name = name
        self.config = config
        self._lock = threading.Lock()
        self._client: Any = None
        self._expires: dt.datetime | None = None
        self._backoff = Backoff(config.backoff_base_s, config.backoff_max_s,
                                retries=config.throttle_retries)
        self.api_calls: Counter[str] = Counter()
        """API calls sent, by boto3 operation name (retries included)."""

    # -- the client ---------------------------------------------------------------------------
    def endpoint(self, target: str) -> str:
        """The API endpoint every call of this channel reaches."""
        return self.config.endpoint_url or f"ec2.{self.config.region}"

    def _session(self) -> Any:
        import boto3

        cfg = self.config
        if cfg.access_key_id is not None and cfg.secret_access_key is not None:
            return boto3.session.Session(
                aws_access_key_id=cfg.access_key_id.reveal(),
                aws_secret_access_key=cfg.secret_access_key.reveal(),
                aws_session_token=cfg.session_token.reveal() if cfg.session_token else None,
                region_name=cfg.region,
            )
        return boto3.session.Session(profile_name=cfg.profile, region_name=cfg.region)

    def _botocore_config(self) -> Any:
        from botocore.config import Config

        return Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=self.config.timeouts.connect_s,
            read_timeout=self.config.timeouts.read_s,
            user_agent_extra="powerplane-cloud",
        )

    def _build(self) -> Any:
        _quiet_botocore()
        cfg = self.config
        session = self._session()
        verify: Any = cfg.verify
        creds: dict[str, Any] = {}
        if cfg.role_arn is not None:
            sts = session.client(
                "sts",
                endpoint_url=cfg.sts_endpoint_url or cfg.endpoint_url,
                verify=verify,
                config=self._botocore_config(),
            )
            kwargs: dict[str, Any] = {
                "RoleArn": cfg.role_arn,
                "RoleSessionName": cfg.role_session_name,
            }
            if cfg.external_id is not None:
                kwargs["ExternalId"] = cfg.external_id
            self.api_calls["assume_role"] += 1
            got = self._guard("assume_role", None, lambda: sts.assume_role(**kwargs))["Credentials"]
            creds = {
                "aws_access_key_id": got["AccessKeyId"],
                "aws_secret_access_key": got["SecretAccessKey"],
                "aws_session_token": got["SessionToken"],
            }
            expiration = got.get("Expiration")
            self._expires = expiration if isinstance(expiration, dt.datetime) else None
        return session.client(
            "ec2",
            endpoint_url=cfg.endpoint_url,
            verify=verify,
            config=self._botocore_config(),
            **creds,
        )

    def _ec2(self) -> Any:
        with self._lock:
            if self._client is not None and self._expires is not None:
                left = self._expires - dt.datetime.now(dt.UTC)
                if left < dt.timedelta(minutes=5):
                    self._client.close()
                    self._client = None
            if self._client is None:
                self._client = self._guard("create the EC2 client", None, self._build)
            return self._client

    def _guard(self, operation: str, target: object, call: Callable[[], Any], *,
               sent: bool = False) -> Any:
        """Run one boto3 call, mapping its exceptions (no retry); ``sent``: a verb's call."""
        from botocore import exceptions as bce

        try:
            return call()
        except (bce.ClientError, bce.BotoCoreError) as exc:
            raise map_error(
                exc, channel=self.name, target=target, operation=operation, sent=sent
            ) from exc

    def _api(self, operation: str, *, retry: bool, target: object, verb: bool = False,
             **kwargs: Any) -> Any:
        """One API call; throttling is retried with backoff only when ``retry``.

        ``verb``: a state-changing call. Each of its attempts passes
        :func:`powerplane.about_to_send` right before it leaves (so nothing leaves once the
        host gave up), and a timeout or a dropped connection after that is
        :class:`~powerplane.OutcomeUnknown`.
        """
        from botocore import exceptions as bce

        client = self._ec2()
        attempt = 0
        while True:
            if verb:
                about_to_send()
            self.api_calls[operation] += 1
            try:
                return self._guard(operation, target,
                                   lambda: getattr(client, operation)(**kwargs), sent=verb)
            except ChannelError as exc:
                cause = exc.__cause__
                if (
                    retry
                    and isinstance(cause, bce.ClientError)
                    and is_throttle(cause)
                    and attempt < self._backoff.retries
                ):
                    time.sleep(self._backoff.delay(attempt))
                    attempt += 1
                    continue
                if isinstance(cause, bce.ClientError) and is_throttle(cause) and attempt:
                    raise map_client_error(
                        cause, channel=self.name, target=target,
                        operation=f"{operation} (after {attempt + 1} attempts)",
                    ) from cause
                raise

    # -- reading ------------------------------------------------------------------------------
    def _states(self, ids: Sequence[str]) -> dict[str, str]:
        """Instance id -> state name for those of ``ids`` that exist.

        Fast path: one ``DescribeInstanceStatus`` (state only, at most 100 ids). Ids it
        does not report, or all of them when it fails on an unknown id, are read with
        ``DescribeInstances`` filtered by id, which omits unknown ids instead of failing.
        """
        from botocore.exceptions import ClientError

        target = self._label(ids)
        states: dict[str, str] = {}
        try:
            kwargs: dict[str, Any] = {"InstanceIds": list(ids), "IncludeAllInstances": True}
            while True:
                page = self._api("describe_instance_status", retry=True, target=target,
                                 **kwargs)
                for status in page.get("InstanceStatuses", []):
                    states[status["InstanceId"]] = status["InstanceState"]["Name"]
                if not page.get("NextToken"):
                    break
                kwargs["NextToken"] = page["NextToken"]
        except ChannelError as exc:
            cause = exc.__cause__
            if not (isinstance(cause, ClientError) and error_code(cause) in NOT_FOUND_CODES):
                raise
        rest = [i for i in ids if i not in states]
        if rest:
            states.update(self._described(rest))
        return states

    def _described(self, ids: Sequence[str], *, page_size: int | None = None) -> dict[str, str]:
        """Instance id -> state name through ``DescribeInstances`` filtered by id (unknown
        ids are left out); ``page_size``: ``MaxResults`` per page."""
        target = self._label(ids)
        states: dict[str, str] = {}
        kwargs: dict[str, Any] = {"Filters": [{"Name": "instance-id", "Values": list(ids)}]}
        if page_size is not None:
            kwargs["MaxResults"] = page_size
        while True:
            page = self._api("describe_instances", retry=True, target=target, **kwargs)
            for reservation in page.get("Reservations", []):
                for inst in reservation.get("Instances", []):
                    states[inst["InstanceId"]] = inst["State"]["Name"]
            token = page.get("NextToken")
            if not token:
                return states
            kwargs["NextToken"] = token

    @staticmethod
    def _label(ids: Sequence[str]) -> object:
        return ids[0] if len(ids) == 1 else f"{len(ids)} instances"

    def _missing(self, instance: str) -> RefusedByDevice:
        return RefusedByDevice(
            f"instance {instance} does not exist (InvalidInstanceID.NotFound)",
            channel=self.name,
            target=instance,
        )

    def _state_of(self, instance: str) -> str:
        state = self._states([instance]).get(instance)
        if state is None:
            raise self._missing(instance)
        return state

    # -- acting -------------------------------------------------------------------------------
    def _act(self, verb: Verb, targets: Sequence[str]) -> list[Outcome]:
        op = _OPS[verb]
        unique = list(dict.fromkeys(targets))
        out: dict[str, Outcome] = {}
        for chunk in _chunks(unique, self.config.batch_size):
            try:
                states = self._states(chunk)
            except PowerplaneError as exc:
                out.update(dict.fromkeys(chunk, exc))
                continue
            send: list[str] = []
            for instance in chunk:
                state = states.get(instance)
                if state is None:
                    out[instance] = self._missing(instance)
                elif (why := _refusal(verb, instance, state)) is not None:
                    out[instance] = RefusedByDevice(why, channel=self.name, target=instance)
                elif (state, verb) in _ALREADY:
                    out[instance] = Acceptance(_ALREADY[state, verb])
                else:
                    send.append(instance)
            if send:
                out.update(self._send(verb, op, send))
        return [out[t] for t in targets]

    def _send(self, verb: Verb, op: _Op, ids: list[str]) -> dict[str, Outcome]:
        target = self._label(ids)
        try:
            response = self._api(op.operation, retry=op.idempotent, target=target,
                                 verb=True, InstanceIds=ids)
        except PowerplaneError as exc:
            return dict.fromkeys(ids, exc)
        if op.response_key is None:
            return dict.fromkeys(ids, Acceptance(f"{verb.value} requested"))
        changes = {c["InstanceId"]: c for c in response.get(op.response_key, [])}
        out: dict[str, Outcome] = {}
        for instance in ids:
            change = changes.get(instance)
            if change is None:
                out[instance] = RefusedByDevice(
                    f"{op.operation} did not report instance {instance}",
                    channel=self.name,
                    target=instance,
                )
                continue
            before = change.get("PreviousState", {}).get("Name", "?")
            after = change.get("CurrentState", {}).get("Name", "?")
            out[instance] = Acceptance(f"{before} -> {after}")
        return out

    def _one(self, verb: Verb, target: str) -> Acceptance:
        require(_CAPS, verb, self.name)
        (outcome,) = self._act(verb, [target])
        if isinstance(outcome, PowerplaneError):
            raise outcome
        return outcome

    # -- the channel protocol ----------------------------------------------------------------
    def capabilities(self, target: str) -> CapabilitySet:
        """The API's verbs, once the instance is found; nothing for a terminated one."""
        return _caps_for(target, self._state_of(target))

    def capabilities_batch(
        self, targets: Sequence[str]
    ) -> list[CapabilitySet | PowerplaneError]:
        """``capabilities`` for many instances, one outcome per target in order.

        One ``DescribeInstances`` per :data:`DESCRIBE_IDS` ids (filtered by instance id, so
        an unknown id is that id's error, never the whole call's), every page read. A
        failed call is the outcome of each id it carried; each id is judged from its own
        instance only.
        """
        unique = list(dict.fromkeys(targets))
        states: dict[str, str] = {}
        failed: dict[str, PowerplaneError] = {}
        for chunk in _chunks(unique, DESCRIBE_IDS):
            try:
                states.update(self._described(chunk, page_size=DESCRIBE_IDS))
            except PowerplaneError as exc:
                failed.update(dict.fromkeys(chunk, exc))
        out: list[CapabilitySet | PowerplaneError] = []
        for target in targets:
            state = states.get(target)
            if target in failed:
                out.append(failed[target])
            elif state is None:
                out.append(self._missing(target))
            else:
                out.append(_caps_for(target, state))
        return out

    def reboot(self, target: str) -> Acceptance:
        return self._one(Verb.REBOOT, target)

    def shutdown(self, target: str) -> Acceptance:
        return self._one(Verb.SHUTDOWN, target)

    def power_on(self, target: str) -> Acceptance:
        return self._one(Verb.POWER_ON, target)

    def terminate(self, target: str) -> Acceptance:
        return self._one(Verb.TERMINATE, target)

    def invoke_batch(self, verb: Verb, targets: Sequence[str]) -> list[Outcome]:
        """``verb`` on many instances, ``batch_size`` ids per API call; one outcome each."""
        require(_CAPS, verb, self.name)
        return self._act(verb, targets)

    def read_power_state(self, target: str) -> Reading:
        return reading_for_state(self._state_of(target))

    def boot_marker(self, target: str) -> str | None:
        """None, always, without a request: the EC2 API shows no value that changes per boot.

        What the API has (botocore's EC2 model, AWS EC2 User Guide): ``LaunchTime``, "the
        time that the instance was last launched", moves when a stopped instance starts,
        and ``StateTransitionReason`` records a stop ("User initiated (<time>)"), emptied
        again on start. Neither changes on ``RebootInstances``, the verb this channel sends
        for reboot: an EC2 reboot is an OS reboot that keeps the instance, and AWS's own
        reboots (scheduled events, automatic recovery) leave them too. A marker from them
        would stay the same across a reboot that did happen, so "unchanged" would be read
        as "not rebooted" and the reboot sent again; a change would show a stop/start,
        which the readings (``stopped``, then ``running``) already show. (moto, the test
        peer, keeps ``LaunchTime`` even across a stop/start.) Evidence of an EC2 reboot must
        come from another source (the node's cluster boot id) or a person.
        """
        return None

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
