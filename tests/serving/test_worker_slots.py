"""`serve --workers N` binds one SO_REUSEPORT socket a worker, and each worker serves the socket of its own slot.

On one shared socket the worker that woke first accepted every connection waiting: 8 keep-alive connections
opened together all went to one worker of two (bench/serve_scaling.py). The slot of a worker that dies goes to
its replacement; with every slot held, a new worker serves every socket rather than leave one unserved.
"""
from __future__ import annotations

import errno
import multiprocessing
import socket

import pytest

from twotower.errors import ConfigError
from twotower.serving import worker_slots
from twotower.serving.listen import bind_listening, close_all, reuse_port_spreads, reuses_port
from twotower.serving.worker_slots import WorkerSockets, claim_slot

linux_only = pytest.mark.skipif(not reuse_port_spreads(), reason="SO_REUSEPORT spreads connections on Linux only")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _plain_bind(port: int) -> None:
    """Bind and listen as another server (uvicorn) would; OSError where the port is held."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(1)


@linux_only
def test_one_reuseport_socket_a_worker_and_the_port_still_refused_to_others():
    port = _free_port()
    sockets = bind_listening("127.0.0.1", port, every_address=False, copies=3)
    try:
        assert len(sockets) == 3 and all(reuses_port(s) for s in sockets)
        assert {s.getsockname() for s in sockets} == {("127.0.0.1", port)}
        with pytest.raises(OSError) as e:
            _plain_bind(port)
        assert e.value.errno == errno.EADDRINUSE
        # a second `serve --workers 2` on the port is told it is taken, not let into the group to take half
        with pytest.raises(ConfigError, match=f"port {port} on 127.0.0.1 is already in use"):
            bind_listening("127.0.0.1", port, every_address=False, copies=2)
    finally:
        close_all(sockets)
    _plain_bind(port)  # free again


def test_a_single_process_server_binds_as_before():
    port = _free_port()
    sockets = bind_listening("127.0.0.1", port, every_address=True, copies=1)
    try:
        assert len(sockets) == 1 and not reuses_port(sockets[0])
    finally:
        close_all(sockets)


def test_without_a_spreading_reuseport_the_workers_share_one_socket_as_before(monkeypatch, tmp_path):
    from twotower.serving import listen, workers

    monkeypatch.setattr(listen, "reuse_port_spreads", lambda: False)  # the BSDs and macOS
    sockets = bind_listening("127.0.0.1", _free_port(), every_address=False, copies=2)
    try:
        assert len(sockets) == 1 and not reuses_port(sockets[0])
        assert workers._per_worker(sockets, 2, str(tmp_path)) is sockets  # handed to uvicorn as it is
    finally:
        close_all(sockets)


def _copies(sockets: list[socket.socket]) -> list[socket.socket]:
    """What a worker gets: its own copies of the supervisor's sockets."""
    return [s.dup() for s in sockets]


@linux_only
def test_each_worker_claims_a_free_slot_and_a_dead_workers_slot_goes_to_its_replacement(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(worker_slots, "_held", [])
    sockets = bind_listening("127.0.0.1", _free_port(), every_address=False, copies=2)
    lock_dir = str(tmp_path / "slots")
    try:
        first = claim_slot(_copies(sockets), lock_dir)
        second = claim_slot(_copies(sockets), lock_dir)
        assert len(first) == len(second) == 1
        assert first[0].fileno() != second[0].fileno()
        # a worker started while both slots are held (a rolling restart) serves every socket: none unserved
        third = _copies(sockets)
        assert claim_slot(third, lock_dir) == third
        os.close(worker_slots._held.pop(0))  # the first worker dies: the kernel drops its lock
        replacement = _copies(sockets)
        mine = claim_slot(replacement, lock_dir)
        assert mine == [replacement[0]] and replacement[1].fileno() == -1  # slot 0 again; its copy of 1 closed
        for group in (first, second, third, mine):
            close_all(group)
    finally:
        for fd in worker_slots._held:
            os.close(fd)
        close_all(sockets)


@linux_only
def test_a_worker_that_cannot_take_a_lock_serves_every_socket(tmp_path):
    # raising here would end the worker as it starts, before it could say why, and uvicorn would start another
    blocker = tmp_path / "file"
    blocker.write_text("")
    sockets = bind_listening("127.0.0.1", _free_port(), every_address=False, copies=2)
    try:
        mine = _copies(sockets)
        assert claim_slot(mine, str(blocker / "slots")) == mine  # a file where the folder should be
        assert all(s.fileno() != -1 for s in mine)
        close_all(mine)
    finally:
        close_all(sockets)


def _child(sockets: list[socket.socket], out: multiprocessing.Queue) -> None:
    out.put([s.getsockname()[1] for s in sockets])


@linux_only
def test_a_spawned_worker_gets_the_socket_of_its_slot_alone(tmp_path):
    # uvicorn starts each worker with the spawn method, pickling the supervisor's list into it
    port = _free_port()
    sockets = bind_listening("127.0.0.1", port, every_address=False, copies=2)
    handed = WorkerSockets(sockets, tmp_path / "slots")
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    try:
        proc = ctx.Process(target=_child, args=(handed, out))
        proc.start()
        got = out.get(timeout=60)
        proc.join(60)
        assert got == [port]  # one socket of the two
        assert len(handed) == 2  # the supervisor's list is whole
    finally:
        close_all(sockets)
