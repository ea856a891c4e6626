"""Which IP addresses count as public: the one judgment of the route guard and the filtering proxy.

Its own module so that :mod:`browser_guard` and :mod:`browser_proxy` both look down to it (no import
circle between them).
"""

from __future__ import annotations

import ipaddress

__all__ = ["embedded_ipv4", "is_public_address"]


_IPV4_CARRIERS = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::/96",  # IPv4-compatible (deprecated): ::a.b.c.d, e.g. ::7f00:1
        "::ffff:0:0/96",  # IPv4-mapped: ::ffff:a.b.c.d
        "::ffff:0:0:0/96",  # IPv4-translated (SIIT): ::ffff:0:a.b.c.d
        "64:ff9b::/96",  # NAT64, the well-known prefix: 64:ff9b::a.b.c.d
    )
)
"""IPv6 prefixes whose last 32 bits are an IPv4 address that the packets end up at."""
_NEVER_PUBLIC = (
    ipaddress.IPv6Network(
        "64:ff9b:1::/48"
    ),  # NAT64 for local use (RFC 8215): the IPv4 may sit anywhere in it
    ipaddress.IPv4Network("192.0.0.0/24"),  # IETF protocol assignments (192.0.0.8: IPv4 dummy address)
)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, compatible, translated, NAT64, 6to4, Teredo).

    Example:
        >>> [str(a) for a in embedded_ipv4(ipaddress.IPv6Address("64:ff9b::7f00:1"))]
        ['127.0.0.1']
        >>> [str(a) for a in embedded_ipv4(ipaddress.IPv6Address("2002:a00:1::1"))]
        ['10.0.0.1']
        >>> embedded_ipv4(ipaddress.IPv6Address("2001:4860:4860::8888"))
        []
    """
    if any(ip in net for net in _IPV4_CARRIERS):
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    if ip.sixtofour is not None:  # 2002:AABB:CCDD::/48 (6to4)
        return [ip.sixtofour]
    if ip.teredo is not None:  # 2001:0::/32: the Teredo server and the (de-obfuscated) client
        return list(ip.teredo)
    return []


def is_public_address(address: str) -> bool:
    """Whether an IP address (as ``getaddrinfo`` returns it) is a public unicast internet address.

    An IPv6 address that carries an IPv4 address (:func:`embedded_ipv4`) is judged by the IPv4 inside:
    ``::7f00:1``, ``64:ff9b::7f00:1`` or ``2002:7f00:1::1`` reach ``127.0.0.1`` as surely as
    ``::ffff:127.0.0.1`` does. ``192.0.0.0/24`` (IETF protocol assignments) is never public.

    Example:
        >>> [is_public_address(a) for a in ("127.0.0.1", "::ffff:127.0.0.1", "169.254.169.254", "10.1.2.3",
        ...     "::1", "fe80::1%eth0", "224.0.0.1", "0.0.0.0", "8.8.8.8", "2001:4860:4860::8888")]
        [False, False, False, False, False, False, False, False, True, True]
        >>> [is_public_address(a) for a in ("::7f00:1", "64:ff9b::7f00:1", "2002:7f00:1::1", "::ffff:0:7f00:1",
        ...     "192.0.0.8", "64:ff9b::808:808")]
        [False, False, False, False, False, True]
    """
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        inside = embedded_ipv4(ip)
        if inside:
            return all(_is_public_ip(v4) for v4 in inside)
    return _is_public_ip(ip)


def _is_public_ip(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Global unicast, and in none of :data:`_NEVER_PUBLIC` (which Python's ``is_global`` lets pass)."""
    never = any(ip.version == net.version and ip in net for net in _NEVER_PUBLIC)
    return bool(ip.is_global and not ip.is_multicast and not never)
