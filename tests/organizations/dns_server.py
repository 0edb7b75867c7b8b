"""A real DNS server on 127.0.0.1 for domain verification tests, answering TXT queries from a dict."""

import socket
import threading

from dnslib import QTYPE, RCODE, RR, TXT
from dnslib.server import BaseResolver, DNSLogger, DNSServer


class TXTResolver(BaseResolver):
    """Answers TXT queries for the names in `records` ({name: [values]}); any other name is NXDOMAIN."""

    def __init__(self):
        self.records: dict[str, list[str]] = {}
        self.queries: list[str] = []

    def resolve(self, request, handler):
        reply = request.reply()
        name = str(request.q.qname).rstrip(".").lower()
        self.queries.append(name)
        if name not in self.records:
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        if request.q.qtype == QTYPE.TXT:
            for value in self.records[name]:
                reply.add_answer(RR(request.q.qname, QTYPE.TXT, rdata=TXT(value), ttl=60))
        return reply


class LocalDNSServer:
    """Started on a free UDP port of 127.0.0.1 only; `port` tells where."""

    def __init__(self):
        self.resolver = TXTResolver()
        self.server = DNSServer(self.resolver, address="127.0.0.1", port=0, logger=DNSLogger(log="-request,-reply"))
        self.port = self.server.server.server_address[1]

    def __enter__(self):
        # A short poll interval so that stopping does not cost half a second per test.
        self.thread = threading.Thread(target=self.server.server.serve_forever, kwargs={"poll_interval": 0.02})
        self.thread.daemon = True
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.stop()
        self.thread.join()
        self.server.server.server_close()


class SilentDNSServer:
    """A UDP socket on 127.0.0.1 that receives queries and never answers: every lookup times out."""

    def __enter__(self):
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        return self

    def __exit__(self, *exc):
        self.socket.close()
