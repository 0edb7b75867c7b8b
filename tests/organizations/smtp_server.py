"""A real SMTP server on 127.0.0.1 for the invite mail tests (aiosmtpd), keeping every mail it accepts."""

import asyncio
import email
import email.policy
import threading

from aiosmtpd.controller import Controller

from tests.live import free_port


class Inbox:
    """aiosmtpd's handler: accepts every mail and keeps it, parsed."""

    def __init__(self):
        self.mails: list[email.message.EmailMessage] = []

    async def handle_DATA(self, server, session, envelope):
        self.mails.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 Message accepted for delivery"


class LateInbox(Inbox):
    """A mail server that takes each message and acknowledges it late: only once `acknowledge` is set. `arrived`
    counts the messages received (acknowledged or not), `received` is set at the first."""

    def __init__(self):
        super().__init__()
        self.acknowledge = threading.Event()
        self.received = threading.Event()
        self.arrived = 0

    async def handle_DATA(self, server, session, envelope):
        self.arrived += 1
        self.received.set()
        await asyncio.get_running_loop().run_in_executor(None, self.acknowledge.wait)
        return await super().handle_DATA(server, session, envelope)


class LocalSMTPServer:
    """Started on a free port of 127.0.0.1; `port` tells where and `mails` holds what it received."""

    def __init__(self, inbox: Inbox | None = None):
        self.inbox = inbox or Inbox()
        self.port = free_port()
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)

    @property
    def mails(self) -> list[email.message.EmailMessage]:
        return self.inbox.mails

    def __enter__(self):
        self.controller.start()
        return self

    def __exit__(self, *exc):
        if isinstance(self.inbox, LateInbox):
            self.inbox.acknowledge.set()  # whatever waits for its answer gets it, and the server can stop
        self.controller.stop()


def smtp_settings(port: int, *, timeout: int = 5) -> dict[str, str]:
    """The environment that points the service's mail at an SMTP server on 127.0.0.1:`port`, without TLS."""
    return {"EMAIL_HOST": "127.0.0.1", "EMAIL_PORT": str(port), "EMAIL_USE_TLS": "false", "EMAIL_TIMEOUT": str(timeout)}
