"""Which http targets a tenant may call: allow-list (host, or host and port) and the address
classes a tenant must never reach through us. Pure: no I/O (the caller resolves the host and
passes the addresses in)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

DEFAULT_PORTS = (80, 443)  # what a bare allow-list entry opens: the web ports, never e.g. Postgres's 5432
# Refused although Python 3.11 counts them global: fec0::/10 is site-local (deprecated, still
# routed inside some networks), 64:ff9b:1::/48 is local-use NAT64, 192.0.0.0/24 holds protocol
# assignments (no webhook lives there).
_NOT_GLOBAL_AFTER_ALL = tuple(ipaddress.ip_network(n) for n in ("fec0::/10", "64:ff9b:1::/48", "192.0.0.0/24"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix: the last 32 bits are IPv4
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d form
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765 ::ffff:0:a.b.c.d


def _entry(entry: str) -> tuple[str, int | None | str]:
    """ "api.example.com" -> (host, None); "api.example.com:8443" -> (host, 8443); "h:*" -> (host, "*");
    "[::1]:8080" -> ("::1", 8080)."""
    entry = entry.strip().lower()
    if entry.startswith("["):  # an IPv6 literal, maybe with a port after the bracket
        host, _, rest = entry[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif entry.count(":") == 1:
        host, _, port_text = entry.partition(":")
    else:  # a name, an IPv4 address, or a bare IPv6 literal (no port)
        host, port_text = entry, ""
    if port_text == "*":
        return host.rstrip("."), "*"
    return host.rstrip("."), int(port_text) if port_text.isdigit() else None


def host_listed(host: str, allow_hosts: Iterable[str], port: int | None = None) -> bool:
    """Exact match, or a ".example.com" entry matching example.com and any subdomain of it. An
    entry may name a port ("example.com:8443", or "example.com:*" for every port); a bare entry
    opens only ports 80 and 443, so listing a host never opens its database ports. `port` None
    checks the host alone.

    >>> host_listed("api.example.com", [".example.com"], 443), host_listed("evil-example.com", [".example.com"], 443)
    (True, False)
    >>> host_listed("db.internal", ["db.internal"], 5432), host_listed("db.internal", ["db.internal:5432"], 5432)
    (False, True)
    """
    host = host.lower().rstrip(".")
    for raw in allow_hosts:
        entry, entry_port = _entry(raw)
        if entry.startswith("."):
            matched = host == entry[1:] or host.endswith(entry)
        else:
            matched = host == entry
        if not matched:
            continue
        if port is None or entry_port == "*" or entry_port == port or (entry_port is None and port in DEFAULT_PORTS):
            return True
    return False


def _wrapped_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries and a relay would deliver to: IPv4-mapped,
    IPv4-compatible, 6to4 (2002::/16), Teredo (2001::/32: server and client) and NAT64."""
    wrapped: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        wrapped.append(ip.ipv4_mapped)
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # not :: or ::1, which are judged as themselves
        wrapped.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.sixtofour is not None:
        wrapped.append(ip.sixtofour)
    if ip.teredo is not None:
        wrapped.extend(ip.teredo)
    if ip in _NAT64 or ip in _IPV4_TRANSLATED:
        wrapped.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return wrapped


def address_refusal(address: str) -> str | None:
    """Why a tenant must not reach this address, or None for a global unicast one. Refused: every
    address that is not global (loopback, RFC 1918, shared 100.64.0.0/10 where one cloud keeps its
    metadata at 100.100.100.200, link-local 169.254/16 and fe80::/10, ULA, reserved, documentation,
    unspecified), multicast, site-local fec0::/10, and any IPv6 form wrapping a refused IPv4.

    >>> address_refusal("100.100.100.200"), address_refusal("2002:a00:1::"), address_refusal("93.184.216.34")
    ('not a global address', 'wraps 10.0.0.1, not a global address', None)
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        for inner in _wrapped_ipv4(ip):
            reason = address_refusal(str(inner))
            if reason is not None:
                return f"wraps {inner}, {reason}"
    if any(ip.version == network.version and ip in network for network in _NOT_GLOBAL_AFTER_ALL):
        return "not a global address"
    if not ip.is_global:
        return "not a global address"
    if ip.is_multicast:
        return "a multicast address"
    return None


def is_private(address: str) -> bool:
    """True for an address a tenant must not reach through us (address_refusal says why)."""
    return address_refusal(address) is not None


def refusal(
    host: str, addresses: Sequence[str], allow_hosts: Sequence[str], allow_private: bool, port: int | None = None
) -> str | None:
    """Why this host (and port) may not be called, or None when it may. `addresses` is what it
    resolved to."""
    listed = host_listed(host, allow_hosts, port)
    if allow_hosts and not listed:
        if port is not None and host_listed(host, allow_hosts):
            return f"port {port} of {host!r} is not in http.allow_hosts (list it as {host}:{port})"
        return f"host {host!r} is not in http.allow_hosts"
    if not addresses:
        return f"host {host!r} resolved to no address"
    if listed or allow_private:
        return None
    for address in addresses:
        reason = address_refusal(address)
        if reason is not None:
            return (f"host {host!r} resolves to a private address ({address}), {reason}; list it in "
                    "http.allow_hosts or set http.allow_private to call it")
    return None


def redact(url: str) -> str:
    """The URL with its userinfo (user name and password: either may be a secret) masked, for
    errors, logs and the API.

    >>> redact("https://bob:s3cret@hooks.example.com/x?y=1")
    'https://***@hooks.example.com/x?y=1'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unparsable URL>"
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()
