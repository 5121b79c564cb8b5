"""`twotower -q serve` (warnings, errors and the output only) still says where it listens.

The address line ("serving ... on http://127.0.0.1:8000; docs at ...") was an information line, left out under
-q, and uvicorn's own "Uvicorn running on ..." is INFO, left out too (its level follows -q): a quiet server said
nothing of its address. The other information lines stay out.
"""
from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

import twotower.serving
from twotower.cli import serve_cmd
from twotower.cli.main import main
from twotower.serving import search_service


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_err(capsys, monkeypatch, tmp_path, *before: str, host: str = "127.0.0.1") -> str:
    """stderr of `serve --search-index` up to serving, with the load and uvicorn stubbed out."""
    monkeypatch.setattr(search_service.SearchService, "load",
                        staticmethod(lambda *a, **k: SimpleNamespace(reranker=None)))
    monkeypatch.setattr(twotower.serving, "create_app", lambda **kwargs: object())
    monkeypatch.setattr(serve_cmd, "_serve_on", lambda *a, **k: None)
    monkeypatch.setattr(serve_cmd, "_bind_port", lambda *a, **k: [])  # no port taken by the test
    monkeypatch.setenv("TWOTOWER_THREADS", "4")  # an information line of serve's own, which -q leaves out
    port = _free_port()
    assert main([*before, "serve", "--search-index", str(tmp_path), "--host", host, "--port", str(port)]) == 0
    return capsys.readouterr().err.replace(str(port), "PORT")


@pytest.mark.parametrize("quiet", [(), ("-q",)], ids=["plain", "quiet"])
def test_the_address_line_is_said_under_quiet_too(capsys, monkeypatch, tmp_path, quiet) -> None:
    err = _serve_err(capsys, monkeypatch, tmp_path, *quiet)
    lines = [line for line in err.splitlines() if "http://" in line]
    assert len(lines) == 1 and lines[0].startswith(f"serving search index {tmp_path} on http://127.0.0.1:PORT; "), err
    assert ("TWOTOWER_THREADS" in err) is not bool(quiet), err  # the other information lines still follow -q


def test_an_ipv6_address_is_said_in_brackets(capsys, monkeypatch, tmp_path) -> None:
    err = _serve_err(capsys, monkeypatch, tmp_path, "-q", host="::1")
    assert " on http://[::1]:PORT; " in err, err
