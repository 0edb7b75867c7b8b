"""Servers shared by the destination tests (tests/pipelines/destinations/) and the end-to-end ones
(tests/pipelines/temporal/)."""

import logging
import uuid

import boto3
import pytest

from tests.live import free_port


@pytest.fixture(scope="module")
def s3_server():
    """moto's standalone S3-compatible server on a free port of 127.0.0.1; its URL (no trailing slash)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def new_bucket(endpoint: str, *, name_prefix: str, prefix: str, key_id: str, secret: str) -> tuple:
    """A fresh bucket on the S3 server at `endpoint`: a client that reads it back, and the S3 destination config."""
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id, aws_secret_access_key=secret
    )
    name = f"{name_prefix}-{uuid.uuid4().hex}"
    client.create_bucket(Bucket=name)
    config = {
        "bucket_name": name,
        "region": "us-east-1",
        "aws_access_key_id": key_id,
        "aws_secret_access_key": secret,
        "endpoint_url": endpoint,
        "prefix": prefix,
    }
    return client, config
