"""Servers shared by the organizations tests."""

import pytest

from tests.organizations.smtp_server import LocalSMTPServer


@pytest.fixture
def smtp_server(settings):
    """A real SMTP server on 127.0.0.1 that this process's mail goes to (tests/organizations/smtp_server.py)."""
    with LocalSMTPServer() as server:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST = "127.0.0.1"
        settings.EMAIL_PORT = server.port
        settings.EMAIL_USE_TLS = False
        settings.EMAIL_USE_SSL = False
        settings.EMAIL_TIMEOUT = 5
        yield server
