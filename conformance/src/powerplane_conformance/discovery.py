"""The discovery checks: a capability set comes back, equals what the target file expects,
and the channel type's config model rejects a key it does not know."""

from __future__ import annotations

from powerplane import CapabilitySet, ConfigError, Verb, parse_config
from powerplane_conformance.checks import check as proves
from powerplane_conformance.context import CheckContext
from powerplane_conformance.hints import BOGUS_KEY

__all__ = ["DiscoveryChecks"]


class DiscoveryChecks:
    """Capabilities discovered, as expected; malformed config rejected with its path."""

    @proves("CAPABILITIES_DISCOVERED", common=True)
    def test_capabilities_discovered(self, check: CheckContext) -> None:
        caps = check.session.caps(check.subject)
        if not isinstance(caps, CapabilitySet):
            check.fail("a capability set", f"discovery failed: {caps}")

    @proves("CAPABILITIES_EXPECTED", common=True)
    def test_capabilities_expected(self, check: CheckContext) -> None:
        name = check.subject.channel
        expected = check.settings.expected_capabilities.get(name)
        if expected is None:
            check.not_tested(f"the target file gives no expected_capabilities for {name}")
        caps = check.caps
        if isinstance(expected, dict):
            want = [f"{v.value} ({expected[v]})" for v in Verb if v in expected]
            got = [f"{v.value} ({'graceful' if caps.is_graceful(v) else 'hard'})" for v in caps]
        else:
            want = [v.value for v in Verb if v in expected]
            got = [v.value for v in caps]
        if want != got:
            check.fail(", ".join(want) or "no verb", ", ".join(got) or "no verb")

    @proves("CONFIG_REJECTS_MALFORMED", common=True)
    def test_config_rejects_malformed(self, check: CheckContext) -> None:
        name = check.subject.channel
        raw = dict((check.session.deployment.raw or {}).get("channels", {}).get(name, {}))
        raw[BOGUS_KEY] = [1]
        doc = {"channels": {name: raw}}
        where = f"channels.{name}.{BOGUS_KEY}"
        try:
            parse_config(doc, registry=check.session.registry)
        except ConfigError as exc:
            paths = [p.path for p in exc.problems]
            if where not in paths:
                check.fail(f"a problem naming {where}", f"problems at {paths or 'no path'}")
            return
        check.fail(f"a ConfigError naming {where}", "the config was accepted")
