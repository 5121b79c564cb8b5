"""One listening socket a worker: ``serve --workers N`` spreads its connections over the workers evenly.

uvicorn's supervisor hands every worker the same list of listening sockets. On one shared socket the workers'
event loops race for each connection, and the one that wakes first accepts every connection waiting: a client
that opened 8 keep-alive connections at once had all 8 on one worker of two, which then served what one worker
serves while the other idled (``bench/serve_scaling.py``). Where the kernel spreads a port's connections over
several ``SO_REUSEPORT`` sockets (Linux), ``twotower serve`` binds one such socket a worker
(:func:`twotower.serving.listen.bind_listening` with ``copies``) and hands them over as :class:`WorkerSockets`.

Pickled into a worker (uvicorn starts each one with the spawn method), the list becomes that worker's slot
alone: the worker takes the first slot no live worker holds (an exclusive ``flock`` on ``SLOTS/i`` in the
server's shared folder, which the kernel drops when the process ends) and closes its copies of the other
sockets (the supervisor keeps them open). A worker that dies leaves its slot to its replacement, whose
connections wait in the socket's backlog meanwhile. Where every slot is held (uvicorn's rolling restart on
SIGHUP starts each new worker before it stops the old one), the new worker serves every socket, so none is
left without a worker.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = ["WorkerSockets", "SLOTS"]

#: the folder of slot locks, inside the server's shared folder
SLOTS = "slots"

_held: list[int] = []  # this worker's slot lock: open, so held, until the process ends


class WorkerSockets(list):  # type: ignore[type-arg] - socket.socket, a list for uvicorn
    """The ``SO_REUSEPORT`` listening sockets of ``--workers N``, one a worker (module docstring); in the
    supervisor, the list of all of them."""

    def __init__(self, sockets: list[socket.socket], lock_dir: str | Path) -> None:
        super().__init__(sockets)
        self.lock_dir = str(lock_dir)

    def __reduce__(self) -> tuple[object, tuple[list[socket.socket], str]]:
        return claim_slot, (list(self), self.lock_dir)


def claim_slot(sockets: list[socket.socket], lock_dir: str) -> list[socket.socket]:
    """In a worker: the socket of the first slot free in ``lock_dir`` (the others closed here), or all of them
    when every slot is held or no lock can be taken. It runs as the worker starts (unpickling its arguments),
    where an exception would end the worker before it could say why, and uvicorn would start another."""
    import fcntl

    try:
        os.makedirs(lock_dir, exist_ok=True)
    except OSError:  # no lock to take (the folder unwritable, the disk full): serving every socket is safe
        return list(sockets)
    for i, mine in enumerate(sockets):
        try:
            fd = os.open(os.path.join(lock_dir, str(i)), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:  # as above
            break
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a live worker holds it
            os.close(fd)
            continue
        _held.append(fd)
        for other in sockets:
            if other is not mine:
                other.close()  # this process's copy only: the supervisor and its worker keep theirs
        return [mine]
    return list(sockets)
