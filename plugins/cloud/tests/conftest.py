"""Fixtures of the cloud plugin's tests: moto's server as the real EC2 peer.

moto (:func:`powerplane_cloud.peer.start_moto`) runs as a subprocess on a free loopback
port for the whole session and is reset (``POST /moto-api/reset``) before each test that
uses it. A second moto, with IAM authentication switched on, serves the credential tests.
A small throttling proxy (:mod:`powerplane_cloud.testing.throttling`) in front of moto
answers ``RequestLimitExceeded`` for chosen actions. Shared names live in ``cloud_peers``
(a unique name: every test folder has a ``conftest``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from cloud_peers import (
    KEY_ENV,
    SECRET_ENV,
    SECRET_VALUE,
    Moto,
    ThrottlingProxy,
    start_moto,
    start_throttling_proxy,
)


@pytest.fixture(scope="session", autouse=True)
def _test_secrets() -> Iterator[None]:
    old = {k: os.environ.get(k) for k in (KEY_ENV, SECRET_ENV)}
    os.environ[KEY_ENV] = "AKIAIOSFODNN7EXAMPLE"
    os.environ[SECRET_ENV] = SECRET_VALUE
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    server = start_moto(tmp_path_factory.mktemp("moto"))
    yield server
    server.stop()


@pytest.fixture
def moto(moto_server: Moto) -> Moto:
    """The session's moto server, reset for this test."""
    moto_server.reset()
    return moto_server


@pytest.fixture(scope="session")
def moto_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """A moto server that checks credentials (its first five calls create two users)."""
    server = start_moto(tmp_path_factory.mktemp("moto-auth"), INITIAL_NO_AUTH_ACTION_COUNT="5")
    iam = server.client("iam")
    iam.create_user(UserName="no-permissions")
    key = iam.create_access_key(UserName="no-permissions")["AccessKey"]
    server.user_key = (key["AccessKeyId"], key["SecretAccessKey"])
    iam.create_user(UserName="operator")
    key = iam.create_access_key(UserName="operator")["AccessKey"]
    iam.put_user_policy(UserName="operator", PolicyName="ec2", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "ec2:*", "Resource": "*"}],
    }))
    server.operator_key = (key["AccessKeyId"], key["SecretAccessKey"])
    yield server
    server.stop()


@pytest.fixture
def throttling(moto: Moto) -> Iterator[ThrottlingProxy]:
    proxy = start_throttling_proxy(moto.url)
    yield proxy
    proxy.stop()
