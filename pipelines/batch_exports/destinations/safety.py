"""Outbound safety: a destination may not point the service at itself, its network or a cloud metadata endpoint.

A destination host (HTTP `url`, Postgres/Redshift `host`, S3 `endpoint_url`) is resolved once, at run time, and
refused when it is a name of the machine itself (`localhost`, `localhost.`, `*.localhost`) or any of its addresses
is loopback, private, link-local, reserved, multicast, unspecified, shared (100.64/10), or otherwise not globally
routable (which covers the metadata endpoints 169.254.169.254, fd00:ec2::254 and 100.100.100.200), or is an IPv6
address standing for an IPv4 one that is (IPv4-mapped, 6to4, NAT64, Teredo), unless
`settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS` is on (development and tests). Runs and tests connect to the
address returned here rather than resolving the name again, so a name cannot resolve to a public address for the
check and a private one for the connection (DNS rebinding). Which addresses are public is decided in
`workspace.outbound`, shared with the other outbound connections the service makes.
"""

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from pipelines.batch_exports.destinations.base import DestinationError
from workspace.outbound import (  # noqa: F401 - is_public_address is part of this module's interface
    METADATA_HOSTNAMES,
    is_loopback_name,
    is_public_address,
)


def private_destinations_allowed() -> bool:
    return bool(getattr(settings, "BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS", False))


def resolve_destination_host(host: str, port: int, *, what: str = "host") -> str:
    """The address to connect to for `host`; DestinationError (not retryable) when it is not allowed.

    An unresolvable name is a retryable error (DNS may be down); a refused address is not.
    """
    host = (host or "").strip().strip("[]")
    if not host:
        raise DestinationError(f"The destination {what} is empty.")
    if host.lower().rstrip(".") in METADATA_HOSTNAMES and not private_destinations_allowed():
        raise DestinationError(f"The destination {what} {host} is a cloud metadata service; refused.")
    if is_loopback_name(host) and not private_destinations_allowed():
        raise DestinationError(
            f"The destination {what} {host} names this machine (loopback); such destinations are refused "
            "(BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS is off)."
        )
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise DestinationError(f"Could not resolve the destination {what} {host}: {exc}.", retryable=True) from exc
    addresses = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = ipaddress.ip_address(sockaddr[0].split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise DestinationError(f"Could not resolve the destination {what} {host}.", retryable=True)
    if not private_destinations_allowed():
        refused = [address for address in addresses if not is_public_address(address)]
        if refused:
            raise DestinationError(
                f"The destination {what} {host} resolves to a private, loopback, link-local or reserved address "
                f"({refused[0]}); such destinations are refused (BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS is off)."
            )
    # Prefer IPv4: hosts with a broken IPv6 route are more common than the reverse.
    addresses.sort(key=lambda address: address.version)
    return str(addresses[0])


def check_destination_url(url: str, *, what: str = "url", default_ports=None) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL whose host is allowed; see `resolve_destination_host`.

    Returns the resolved address as the host.
    """
    default_ports = default_ports or {"http": 80, "https": 443}
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise DestinationError(f"The destination {what} is not a valid URL.") from exc
    scheme = (parts.scheme or "").lower()
    if scheme not in default_ports or not parts.hostname:
        raise DestinationError(f"The destination {what} must be an http or https URL.")
    port = port or default_ports[scheme]
    return scheme, resolve_destination_host(parts.hostname, port, what=what), port
