"""What the docs pages and browsers ask the service for besides the API: an icon, and Redoc's bundle without the
logo it would fetch from its maker's CDN."""

import pytest
from django.test import Client

from workspace.views import REDOC_LOGO


@pytest.fixture
def client():
    return Client()


def test_the_favicon_is_an_image(client):
    response = client.get("/favicon.ico")

    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert response.content.startswith(b"<svg")


def test_the_redoc_page_loads_the_services_own_bundle_without_the_cdn_logo(client):
    page = client.get("/api/redoc/").content.decode()
    assert 'src="/api/redoc/redoc.standalone.js"' in page

    bundle = client.get("/api/redoc/redoc.standalone.js")

    assert bundle.status_code == 200
    assert bundle["Content-Type"].startswith("application/javascript")
    assert REDOC_LOGO not in bundle.content
    assert b"/static/workspace/favicon.svg" in bundle.content
    assert len(bundle.content) > 500_000  # the whole bundle, not a stand-in


def test_the_schema_states_one_security_scheme_per_operation(client):
    import yaml

    schema = yaml.safe_load(client.get("/api/schema/").content)
    securities = {
        str(operation.get("security"))
        for item in schema["paths"].values()
        for operation in item.values()
        if isinstance(operation, dict) and "responses" in operation
    }
    assert securities == {"[{'PersonalAPIKeyAuth': []}]"}
    assert list(schema["components"]["securitySchemes"]) == ["PersonalAPIKeyAuth"]
