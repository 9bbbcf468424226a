"""The daemon's two TCP listeners ([api] for tenants, [ops] for operators): bound before serving,
and checked free before a slow start (embedded servers, migrations) so a taken port is said at once.

Standard library and config only: `python3 -m schedulerd.listeners` runs from the repository
before anything is installed (scripts/run), exit 2 with the message when a port is taken.
"""

from __future__ import annotations

import socket
import sys

from schedulerd import config as config_module
from schedulerd.config import Config
from schedulerd.errors import ConfigError


def bind(host: str, port: int, section: str = "api") -> socket.socket:
    """A socket bound to host:port and listening; a taken port is a ConfigError naming the
    setting and the variable that move it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"{section}: cannot listen on {host}:{port} ({exc.strerror}); set [{section}].port or "
                          f"SCHEDULERD_{section.upper()}_PORT") from None  # fmt: skip
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def enabled(config: Config) -> list[tuple[str, str, int]]:
    """(section, host, port) of each listener the daemon will open."""
    return [(section, part.host, part.port) for section, part in (("api", config.api), ("ops", config.ops)) if part.enabled]


def check_free(config: Config) -> None:
    """Raise ConfigError (as bind would) for the first enabled listener whose port is taken.
    Binds and lets go at once; the daemon binds again when it serves."""
    for section, host, port in enabled(config):
        bind(host, port, section).close()


def main(argv: list[str] | None = None) -> int:
    """`python3 -m schedulerd.listeners [CONFIG]`: 0 when every enabled listener's port is free."""
    args = sys.argv[1:] if argv is None else argv
    try:
        check_free(config_module.load(args[0] if args else None))
    except ConfigError as exc:
        print(f"schedulerd: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
