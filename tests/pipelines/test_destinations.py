"""Config keys of destinations with a fixed shape: what is accepted next to what test_batch_exports_api refuses."""

import pytest

from pipelines.batch_exports.destinations import DESTINATIONS
from tests.pipelines.test_batch_exports_api import VALID_CONFIGS


@pytest.mark.parametrize(
    ("destination_type", "changes"),
    [
        ("S3", {"endpoint_url": "http://minio:9000"}),
        ("S3", {"endpoint_url": "https://s3.example.com/path?x=1"}),
        ("S3", {"endpoint_url": ""}),
        ("S3", {"endpoint_url": None}),
        ("S3", {"encryption": "aws:kms", "kms_key_id": "key", "max_file_size_mb": 100}),
        ("Redshift", {"properties_data_type": "varchar"}),
        ("Redshift", {"properties_data_type": "super"}),
        ("HTTP", {"url": "http://127.0.0.1:8000/batch/"}),
    ],
)
def test_accepted(destination_type, changes):
    assert DESTINATIONS[destination_type].problems({**VALID_CONFIGS[destination_type], **changes}) == {}


@pytest.mark.parametrize(
    ("destination_type", "changes", "key"),
    [
        ("S3", {"endpoint_url": "minio:9000"}, "endpoint_url"),
        ("S3", {"endpoint_url": "http://"}, "endpoint_url"),
        ("S3", {"encryption": "aes256"}, "encryption"),
        ("S3", {"max_file_size_mb": "100"}, "max_file_size_mb"),
        ("Redshift", {"properties_data_type": "JSON"}, "properties_data_type"),
        ("HTTP", {"url": "https://exa mple.com/batch"}, "url"),
    ],
)
def test_refused(destination_type, changes, key):
    problems = DESTINATIONS[destination_type].problems({**VALID_CONFIGS[destination_type], **changes})
    assert list(problems) == [key]
