"""The listening sockets of ``twotower serve``: bound once, before the run is loaded, and handed to uvicorn.

The server used to check the port with a throw-away socket before the (slow) load and let uvicorn bind again
after it: a process that took the port in between got the user uvicorn's ``[Errno 98] ... address already in
use`` after the whole load. The socket bound here listens from the check on (on Linux a socket bound with
SO_REUSEADDR but not listening does not keep another such bind off the port), and is the very one uvicorn serves
on; connections made during the load wait in its backlog. Standard library only: the CLI binds before it imports
uvicorn or the service.
"""
from __future__ import annotations

import errno
import logging
import socket
import sys

from twotower.errors import ConfigError

__all__ = ["BACKLOG", "bind_listening", "close_all", "log_listening", "reuse_port_spreads", "reuses_port"]

#: the listen backlog, uvicorn's default (``Config.backlog``), which it gives ``listen`` again when it serves
BACKLOG = 2048


def _addresses(host: str, port: int, every_address: bool) -> list[tuple[int, int, int, tuple[object, ...]]]:
    """(family, type, proto, address) to bind, as uvicorn would: every address ``host`` resolves to for one
    process (asyncio's ``create_server``), one for its workers' supervisor (``Config.bind_socket``)."""
    if every_address:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    else:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        infos = socket.getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)[:1]
    seen: list[tuple[int, int, int, tuple[object, ...]]] = []
    for family, kind, proto, _, addr in infos:
        if (family, kind, proto, addr) not in seen:  # a name may resolve to one address twice
            seen.append((family, kind, proto, addr))
    return seen


def reuse_port_spreads() -> bool:
    """Whether the kernel spreads a port's new connections over several ``SO_REUSEPORT`` listening sockets (Linux;
    on the BSDs and macOS the option lets sockets share a port without spreading its connections)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def reuses_port(sock: socket.socket) -> bool:
    """Whether ``sock`` was bound with ``SO_REUSEPORT``."""
    return hasattr(socket, "SO_REUSEPORT") and bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT))


def _bind_one(family: int, kind: int, proto: int, addr: tuple[object, ...], *, host: str, port: int,
              v6only: bool, reuse_port: bool = False, listen: bool = True) -> socket.socket:
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if v6only and family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # as asyncio's create_server binds
        sock.bind(addr)
        if listen:
            sock.listen(BACKLOG)  # held from now on: see the module's docstring
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is already in use (another `twotower serve`?); "
                              "stop it or choose another with --port N") from None
        if e.errno == errno.EACCES:
            raise ConfigError(f"port {port} on {host}: permission denied (ports below 1024 need root); "
                              "choose another with --port N") from None
        raise ConfigError(f"--host {host} --port {port}: cannot bind ({e.strerror or e})") from None
    return sock


def bind_listening(host: str, port: int, *, every_address: bool = True, copies: int = 1) -> list[socket.socket]:
    """Listening sockets on ``host``:``port``, bound as uvicorn binds them; ConfigError in one line naming
    ``--port`` or ``--host`` where the port is taken, forbidden or the host unknown (none left open then).

    ``every_address``: each address ``host`` resolves to, IPv6 ones IPv6-only, as one uvicorn process binds;
    False: the one socket uvicorn's multi-process supervisor binds (IPv6 when ``host`` has a colon).
    ``copies`` (with ``every_address=False``, where :func:`reuse_port_spreads`): that many ``SO_REUSEPORT``
    sockets on the one address, one for each worker. Workers accepting on one shared socket split its
    connections unevenly: whichever event loop wakes first accepts every connection waiting, so a client's
    8 keep-alive connections opened together all went to one worker of two (``bench/serve_scaling.py``: 2
    workers served what 1 did). The kernel spreads connections over the copies by their addresses instead.
    A plain bind first keeps the port's test: ``SO_REUSEPORT`` would let a second server of the same user
    join the port and take half its connections, where it must be told the port is taken.
    """
    try:
        addresses = _addresses(host, port, every_address)
    except socket.gaierror as e:
        raise ConfigError(f"--host {host}: cannot resolve it ({e.strerror or e})") from None
    reuse = copies > 1 and not every_address and reuse_port_spreads()
    sockets: list[socket.socket] = []
    try:
        if reuse:  # the one address, once a socket; a plain bind first says whether the port is taken
            _bind_one(*addresses[0], host=host, port=port, v6only=False, listen=False).close()
            addresses = addresses[:1] * copies
        for family, kind, proto, addr in addresses:
            sockets.append(_bind_one(family, kind, proto, addr, host=host, port=port, v6only=every_address,
                                     reuse_port=reuse))
    except BaseException:
        close_all(sockets)
        raise
    return sockets


def close_all(sockets: list[socket.socket]) -> None:
    """Close each socket (closing one already closed, by uvicorn's shutdown, is harmless)."""
    for sock in sockets:
        sock.close()


def log_listening(host: str, sockets: list[socket.socket]) -> None:
    """uvicorn's ``Uvicorn running on http://HOST:PORT (Press CTRL+C to quit)``, which it leaves out when handed
    its sockets."""
    port = sockets[0].getsockname()[1] if sockets else 0
    addr_format = "%s://[%s]:%d" if ":" in host else "%s://%s:%d"
    logging.getLogger("uvicorn.error").info(f"Uvicorn running on {addr_format} (Press CTRL+C to quit)",
                                            "http", host, port)
