"""Servers shared by the destination tests (tests/pipelines/exporters/) and the end-to-end ones
(tests/pipelines/temporal/)."""

import logging

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
