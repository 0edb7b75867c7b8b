"""Outbound safety, optional connectors and secrets: what every destination shares."""

import ipaddress
import socket
import sys

import pytest

from pipelines.batch_exports.destinations import DestinationError
from pipelines.batch_exports.destinations.base import scrub
from pipelines.batch_exports.destinations.safety import is_public_address, resolve_destination_host
from tests.pipelines.destinations.conftest import make_events

POSTGRES = {"port": 5432, "database": "d", "user": "u", "password": "pg-pass-123", "schema": "s", "table_name": "t"}


@pytest.mark.parametrize(
    ("destination_type", "config"),
    [
        ("Postgres", {**POSTGRES, "host": "127.0.0.1"}),
        ("Postgres", {**POSTGRES, "host": "localhost"}),
        ("Redshift", {**POSTGRES, "host": "192.168.1.20"}),
        ("Postgres", {**POSTGRES, "host": "metadata.google.internal"}),
        ("S3", {"bucket_name": "b", "region": "r", "aws_access_key_id": "k", "aws_secret_access_key": "s3-pass-123",
                "endpoint_url": "http://172.16.0.1:9000"}),
        ("HTTP", {"url": "http://[fe80::1]/batch/", "token": "t"}),
        ("HTTP", {"url": "http://localhost./batch/", "token": "t"}),
        ("HTTP", {"url": "http://[2002:7f00:1::]/batch/", "token": "t"}),
        ("Postgres", {**POSTGRES, "host": "2002:c0a8:114::"}),
    ],
)  # fmt: skip
def test_private_destination_hosts_are_refused_at_run_time(destination_type, config, run):
    with pytest.raises(DestinationError) as raised:
        run.export(destination_type, config, make_events(1))
    assert "refused" in raised.value.message
    assert raised.value.retryable is False
    assert "pass-123" not in raised.value.message


def test_a_name_is_resolved_once_and_every_address_must_be_public(monkeypatch):
    answers = {"mixed.example": ["93.184.216.34", "10.0.0.5"], "public.example": ["93.184.216.34"]}
    calls = []

    def fake_getaddrinfo(host, port, **kwargs):
        calls.append(host)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in answers[host]]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)

    assert resolve_destination_host("public.example", 443) == "93.184.216.34"
    with pytest.raises(DestinationError, match="10.0.0.5"):
        resolve_destination_host("mixed.example", 443)
    with pytest.raises(DestinationError) as raised:
        resolve_destination_host("nowhere.example", 443)
    assert raised.value.retryable is True  # DNS may come back
    assert calls == ["public.example", "mixed.example", "nowhere.example"]


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("::ffff:93.184.216.34", True),
        ("2002:5db8:d822::1", True),  # 6to4 of a public address
        ("127.0.0.1", False),
        ("::ffff:127.0.0.1", False),
        ("2002:7f00:1::", False),
        ("2002:a9fe:a9fe::", False),  # 6to4 of the metadata address
        ("2002:6440:1::", False),  # 6to4 of shared 100.64.0.1
        ("64:ff9b::a00:1", False),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", False),
        ("::127.0.0.1", False),
    ],
)
def test_an_ipv6_address_is_as_public_as_the_ipv4_address_it_carries(address, public):
    assert is_public_address(ipaddress.ip_address(address)) is public


@pytest.mark.parametrize("host", ["localhost.", "LOCALHOST", "a.b.localhost", "localhost.localdomain", "ip6-loopback"])
def test_names_of_the_machine_are_refused_without_asking_a_resolver(monkeypatch, host):
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: pytest.fail("resolved"))

    with pytest.raises(DestinationError, match="loopback") as raised:
        resolve_destination_host(host, 443)
    assert raised.value.retryable is False


def test_allowed_private_host_is_returned_as_the_address_to_connect_to(settings):
    settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = True
    assert resolve_destination_host("localhost", 5432) in {"127.0.0.1", "::1"}


@pytest.fixture
def without_modules(monkeypatch):
    """without_modules(*names): importing those packages fails, as when an extra is not installed (a None entry in
    sys.modules makes any import of the name raise ImportError, even when the package is installed)."""

    def block(*names):
        for name in names:
            monkeypatch.setitem(sys.modules, name, None)

    return block


@pytest.mark.parametrize(
    ("destination_type", "package", "extra", "config"),
    [
        ("Snowflake", "snowflake", "snowflake", {"account": "a", "database": "d", "warehouse": "w", "user": "u",
                                                 "password": "sf-pass-123", "schema": "s", "table_name": "t"}),
        ("BigQuery", "google", "bigquery", {"project_id": "p", "dataset_id": "d", "table_id": "t",
                                            "private_key": "bq-pass-123", "private_key_id": "k", "token_uri": "u",
                                            "client_email": "e@x"}),
    ],
)  # fmt: skip
def test_optional_connector_missing_says_which_extra_to_install(
    destination_type, package, extra, config, without_modules, run
):
    without_modules(package, f"{package}.connector", f"{package}.cloud", f"{package}.cloud.bigquery")
    with pytest.raises(DestinationError) as raised:
        run.export(destination_type, config, make_events(1))
    assert f"pip install 'analytics-workspace[{extra}]'" in raised.value.message
    assert raised.value.retryable is False
    assert "pass-123" not in raised.value.message


def test_scrub_removes_known_secrets_and_credential_shapes():
    text = (
        "connect postgres://loader:hunter2@db.example.com/x failed; password=hunter3 token: 'abc def' "
        "and the key s3cr3t-value appeared"
    )
    scrubbed = scrub(text, ["s3cr3t-value"])
    for secret in ("hunter2", "hunter3", "abc def", "s3cr3t-value"):
        assert secret not in scrubbed
    assert "db.example.com" in scrubbed and "loader" in scrubbed


def test_an_unexpected_exception_is_reported_without_secrets(run, monkeypatch):
    from pipelines.batch_exports.destinations.noop import NoOp

    def explode(self, events):
        raise RuntimeError(f"client blew up with {self.config['token']}")

    monkeypatch.setattr(NoOp, "export", explode)
    with pytest.raises(DestinationError) as raised:
        run.export("NoOp", {"token": "tok-very-secret"}, make_events(1))
    assert "tok-very-secret" not in raised.value.message
    assert "RuntimeError" in raised.value.message
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
