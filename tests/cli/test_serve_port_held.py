"""`twotower serve` holds its port from the check before the load until it serves, on that very socket.

The port was checked with a socket closed at once, and uvicorn bound again after the (slow) load: a process that
took the port meanwhile left the user uvicorn's `[Errno 98] error while attempting to bind on address ... address
already in use` after the whole load. The competitor here binds as uvicorn and `serve` do (SO_REUSEADDR), which on
Linux a bound socket that is not listening does not keep off the port.
"""
from __future__ import annotations

import errno
import socket
from types import SimpleNamespace

import pytest

import twotower.serving
import twotower.serving.workers as workers
from twotower.cli import serve_cmd
from twotower.cli.main import build_parser, main
from twotower.serving import search_service
from twotower.serving.listen import reuse_port_spreads


class Stop(Exception):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bind_as_another_server(port: int) -> socket.socket:
    """Bind and listen on the port as uvicorn would in another process; OSError where it is held."""
    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(1)
    except OSError:
        sock.close()
        raise
    return sock


def _held(port: int) -> bool:
    try:
        _bind_as_another_server(port).close()
    except OSError as e:
        assert e.errno == errno.EADDRINUSE, e
        return True
    return False


def _serve(tmp_path, port: int, *flags: str):
    return build_parser().parse_args(["serve", "--search-index", str(tmp_path), "--port", str(port), *flags])


def test_the_port_is_held_through_the_load_and_free_after_a_load_error(tmp_path, monkeypatch):
    port = _free_port()
    during: list[bool] = []

    def slow_load(index_dir, rerank_dir=None, *, rerank_settings=None):
        during.append(_held(port))  # another server trying the port while this one loads
        raise Stop

    monkeypatch.setattr(search_service.SearchService, "load", staticmethod(slow_load))
    with pytest.raises(Stop):
        serve_cmd.cmd_serve(_serve(tmp_path, port))
    assert during == [True]
    assert not _held(port)  # the failed load left no listening socket behind


@pytest.mark.parametrize("n_workers", [1, 2])
def test_the_server_serves_on_the_socket_bound_before_the_load(tmp_path, monkeypatch, n_workers):
    port = _free_port()
    handed: list[socket.socket] = []
    addresses: list[tuple[str, int]] = []

    monkeypatch.setattr(search_service.SearchService, "load",
                        staticmethod(lambda *a, **k: SimpleNamespace(reranker=None)))

    def serve_on(app, host, port_, log_level, sockets):
        handed.extend(sockets)
        addresses.extend(s.getsockname() for s in sockets)
        assert _held(port)

    def supervise(spec, *, workers, log_level, sockets):  # it execs the supervisor, which inherits the sockets
        handed.extend(sockets)
        addresses.extend(s.getsockname() for s in sockets)
        assert _held(port)
        raise Stop

    monkeypatch.setattr(twotower.serving, "create_app", lambda **kwargs: object())
    monkeypatch.setattr(serve_cmd, "_serve_on", serve_on)
    monkeypatch.setattr(workers, "supervise", supervise)
    swept = []  # what a killed --workers server left is swept by every start (a single worker's swept nothing)
    monkeypatch.setattr(workers, "sweep_shared_dirs", lambda: swept.append(True))
    args = _serve(tmp_path, port, "--workers", str(n_workers))
    if n_workers == 1:
        assert serve_cmd.cmd_serve(args) == 0
    else:
        with pytest.raises(Stop):
            serve_cmd.cmd_serve(args)
    # workers: one SO_REUSEPORT socket each where the kernel spreads connections over them (serving/worker_slots.py)
    copies = n_workers if n_workers > 1 and reuse_port_spreads() else 1
    assert addresses == [("127.0.0.1", port)] * copies
    assert all(s.fileno() == -1 for s in handed)  # closed once served (uvicorn closes it too): the port free again
    assert not _held(port)
    assert swept == [True]


def test_the_workers_supervisor_serves_on_the_socket_it_inherits(tmp_path, monkeypatch):
    from dataclasses import asdict

    from twotower.serving.settings import ServiceSettings

    port = _free_port()
    fd = serve_cmd._bind_port("127.0.0.1", port, every_address=False)[0].detach()  # what supervise() hands on
    spec = workers.WorkerSpec(shared_dir=str(tmp_path / "shared"), settings=asdict(ServiceSettings(port=port)))
    (tmp_path / "shared").mkdir()
    given: list[list[socket.socket]] = []
    addresses: list[tuple[str, int]] = []

    def run_on_sockets(factory, sockets, options):
        given.append(sockets)
        addresses.extend(s.getsockname() for s in sockets)
        assert _held(port)

    monkeypatch.setattr(workers, "_run_on_sockets", run_on_sockets)
    assert workers._supervise_main([str(spec.write()), "2", "warning", "30", str(fd)]) == 0
    assert addresses == [("127.0.0.1", port)]
    assert given[0][0].fileno() == -1  # closed when the server stopped
    assert not _held(port)


def test_a_taken_port_is_still_one_line_before_the_load(tmp_path, capsys):
    port = _free_port()
    with _bind_as_another_server(port):
        assert main(["serve", "--search-index", str(tmp_path / "nope"), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"error: port {port} on 127.0.0.1 is already in use (another `twotower serve`?); "
                           "stop it or choose another with --port N")


def test_quiet_serves_with_uvicorn_at_warning(tmp_path, monkeypatch):
    """`twotower -q serve` still printed uvicorn's four start-up INFO lines: its level follows the command's."""
    import logging
    from types import SimpleNamespace

    import twotower.serving

    levels: list[str] = []
    monkeypatch.setattr(search_service.SearchService, "load",
                        staticmethod(lambda *a, **k: SimpleNamespace(reranker=None)))
    monkeypatch.setattr(twotower.serving, "create_app", lambda **kwargs: object())
    monkeypatch.setattr(serve_cmd, "_serve_on", lambda app, host, port, log_level, sockets: levels.append(log_level))
    monkeypatch.setattr(logging.getLogger(), "level", logging.WARNING)  # what -q sets
    assert serve_cmd.cmd_serve(_serve(tmp_path, _free_port())) == 0
    assert serve_cmd.cmd_serve(_serve(tmp_path, _free_port(), "--log-level", "debug")) == 0  # named: kept
    monkeypatch.setattr(logging.getLogger(), "level", logging.INFO)
    assert serve_cmd.cmd_serve(_serve(tmp_path, _free_port())) == 0
    assert levels == ["warning", "debug", "info"]
