"""What the distribution says about itself matches what it does: basic authentication goes
through the direct client (``http.client``), never sushy; sessions go through sushy."""

from __future__ import annotations

import powerplane_redfish
from powerplane_redfish import connection, plugin


def test_the_package_docstring_names_both_transports_and_basic_is_not_through_sushy() -> None:
    doc = powerplane_redfish.__doc__ or ""
    assert "through sushy)" not in doc.splitlines()[0]
    assert "``http.client``" in doc and "``auth: basic``" in doc
    assert "sushy root" in doc and "``auth: session``" in doc


def test_the_plugin_says_sushy_is_imported_for_sessions_only() -> None:
    doc = plugin.__doc__ or ""
    assert "basic authentication uses the direct client and never imports it" in doc
    assert "(sushy)" not in plugin.__getattr__("REDFISH").description


def test_the_connection_docstring_states_one_rule_for_every_auth_mode() -> None:
    doc = connection.__doc__ or ""
    assert "One transport rule for every auth mode" in doc
    assert "REQUESTS_CA_BUNDLE" in doc and "HTTPS_PROXY" in doc
    assert "Connector._session" in doc  # the private name used, and why
