"""A real SMTP server on 127.0.0.1 for the invite mail tests (aiosmtpd), keeping every mail it accepts."""

import email
import email.policy

from aiosmtpd.controller import Controller

from tests.live import free_port


class Inbox:
    """aiosmtpd's handler: accepts every mail and keeps it, parsed."""

    def __init__(self):
        self.mails: list[email.message.EmailMessage] = []

    async def handle_DATA(self, server, session, envelope):
        self.mails.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 Message accepted for delivery"


class LocalSMTPServer:
    """Started on a free port of 127.0.0.1; `port` tells where and `mails` holds what it received."""

    def __init__(self):
        self.inbox = Inbox()
        self.port = free_port()
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)

    @property
    def mails(self) -> list[email.message.EmailMessage]:
        return self.inbox.mails

    def __enter__(self):
        self.controller.start()
        return self

    def __exit__(self, *exc):
        self.controller.stop()


def smtp_settings(port: int, *, timeout: int = 5) -> dict[str, str]:
    """The environment that points the service's mail at an SMTP server on 127.0.0.1:`port`, without TLS."""
    return {"EMAIL_HOST": "127.0.0.1", "EMAIL_PORT": str(port), "EMAIL_USE_TLS": "false", "EMAIL_TIMEOUT": str(timeout)}
