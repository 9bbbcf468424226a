"""Which http targets a tenant may call: allow-list and private-range checks. Pure: no I/O
(the caller resolves the host and passes the addresses in)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence


def host_listed(host: str, allow_hosts: Iterable[str]) -> bool:
    """Exact match, or a ".example.com" entry matching example.com and any subdomain of it.

    >>> host_listed("api.example.com", [".example.com"]), host_listed("evil-example.com", [".example.com"])
    (True, False)
    """
    host = host.lower().rstrip(".")
    for entry in allow_hosts:
        entry = entry.lower().rstrip(".")
        if entry.startswith(".") and (host == entry[1:] or host.endswith(entry)):
            return True
        if host == entry:
            return True
    return False


def is_private(address: str) -> bool:
    """Loopback, private (RFC 1918, ULA), link-local (cloud metadata lives there), multicast,
    reserved or unspecified: addresses a tenant must not reach through us."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast
        or ip.is_reserved or ip.is_unspecified
    )  # fmt: skip


def refusal(host: str, addresses: Sequence[str], allow_hosts: Sequence[str], allow_private: bool) -> str | None:
    """Why this host may not be called, or None when it may. `addresses` is what it resolved to."""
    listed = host_listed(host, allow_hosts)
    if allow_hosts and not listed:
        return f"host {host!r} is not in http.allow_hosts"
    if not addresses:
        return f"host {host!r} resolved to no address"
    if listed or allow_private:
        return None
    private = [a for a in addresses if is_private(a)]
    if private:
        return (f"host {host!r} resolves to a private address ({private[0]}); list it in http.allow_hosts "
                "or set http.allow_private to call it")
    return None
