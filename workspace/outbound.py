"""Which addresses the service may connect to on someone else's say-so (a batch export's destination, a webhook, an
OAuth client's metadata document): never the machine itself, its network or a cloud metadata endpoint.

An address is refused when it is loopback, private, link-local, reserved, multicast, unspecified, shared (100.64/10),
or otherwise not globally routable (which covers the metadata endpoints 169.254.169.254, fd00:ec2::254 and
100.100.100.200), or is an IPv6 address standing for an IPv4 one that is (IPv4-mapped, 6to4, NAT64, Teredo). Names of
the machine itself (`localhost`, `*.localhost`) and of metadata services are refused without asking a resolver.
Callers resolve a name once and connect to the address they checked, so DNS rebinding cannot swap it afterwards.
"""

import ipaddress

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


def is_metadata_name(host: str) -> bool:
    return host.lower().rstrip(".") in METADATA_HOSTNAMES


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
