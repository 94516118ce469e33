"""Property-based API testing from the OpenAPI document (schemathesis): generated requests
of every operation, as an admin through the auth proxy, find no 5xx, no response that
violates its documented schema, and no undocumented content type or status code."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from servers_support import ADMIN, make_app, served, write_fleet

from powerplane_servers.settings import Limits, ProxySettings, ServeSettings

SETTINGS = ServeSettings(proxy=ProxySettings(trusted=("127.0.0.1",)),
                         limits=Limits(act_burst=10_000, acts_per_minute=600_000))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("schemathesis")
    with served(make_app(write_fleet(tmp), SETTINGS)) as url:
        yield url


def operations(base: str) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{base}/api/v1/openapi.json")
    found = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    # the event stream runs until its maintenance ends: test_api follows one instead
    return [op for op in found if not op.label.endswith("/events")]


def test_no_5xx_and_no_schema_violation(base: str) -> None:
    ops = operations(base)
    assert len(ops) == 11, [op.label for op in ops]
    for op in ops:

        @given(case=op.as_strategy())
        @settings(max_examples=40, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case: Any) -> None:
            case.call_and_validate(base_url=base, headers=ADMIN, timeout=30, checks=[
                not_a_server_error, response_schema_conformance, content_type_conformance,
                status_code_conformance])

        run()
