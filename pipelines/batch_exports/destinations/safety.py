"""Outbound safety: a destination may not point the service at itself, its network or a cloud metadata endpoint.

A destination host (HTTP `url`, Postgres/Redshift `host`, S3 `endpoint_url`) is resolved once, at run time, and
refused when it is a name of the machine itself (`localhost`, `localhost.`, `*.localhost`) or any of its addresses
is loopback, private, link-local, reserved, multicast, unspecified, shared (100.64/10), or otherwise not globally
routable (which covers the metadata endpoints 169.254.169.254, fd00:ec2::254 and 100.100.100.200), or is an IPv6
address standing for an IPv4 one that is (IPv4-mapped, 6to4, NAT64, Teredo), unless
`settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS` is on (development and tests). Runs and tests connect to the
address returned here rather than resolving the name again, so a name cannot resolve to a public address for the
check and a private one for the connection (DNS rebinding).
"""

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from pipelines.batch_exports.destinations.base import DestinationError

# Not "private" in Python's tables on every version, but metadata services of clouds.
METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),
        ipaddress.ip_address("169.254.170.2"),
        ipaddress.ip_address("100.100.100.200"),
        ipaddress.ip_address("fd00:ec2::254"),
    }
)
METADATA_HOSTNAMES = frozenset({"metadata.google.internal", "metadata", "instance-data"})
# Names of the machine itself, refused without asking a resolver (which may not know them, and say so, when the write
# is checked, then answer 127.0.0.1 at a delivery): `localhost` and every name under it (RFC 6761), and the loopback
# names of Debian's and Red Hat's /etc/hosts. A trailing dot spells the same name (`localhost.`).
LOOPBACK_HOSTNAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
# NAT64's well-known prefix (RFC 6052): its addresses carry an IPv4 address in their last 32 bits.
NAT64_PREFIX = ipaddress.ip_network("64:ff9b::/96")


def private_destinations_allowed() -> bool:
    return bool(getattr(settings, "BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS", False))


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address stands for: IPv4-mapped (`::ffff:127.0.0.1`), 6to4 (`2002:7f00:1::`),
    NAT64 (`64:ff9b::7f00:1`) and Teredo's client. Traffic to it reaches them, so they must be public too."""
    carried = [address.ipv4_mapped, address.sixtofour, address.teredo[1] if address.teredo else None]
    if address in NAT64_PREFIX:
        carried.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [ipv4 for ipv4 in carried if ipv4 is not None]


def is_loopback_name(host: str) -> bool:
    name = host.lower().rstrip(".")
    return name in LOOPBACK_HOSTNAMES or name.endswith(".localhost")


def is_public_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        if any(not is_public_address(ipv4) for ipv4 in embedded_ipv4(address)):
            return False
        if address.ipv4_mapped is not None:  # judged as the IPv4 address it is
            return True
    if address in METADATA_ADDRESSES:
        return False
    return address.is_global and not (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_reserved
        or address.is_multicast
        or address.is_unspecified
    )


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
