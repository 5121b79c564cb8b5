"""`twotower serve` under NO_COLOR or TERM=dumb logs plain text: uvicorn's lines kept their escape codes
(`^[[32mINFO^[[0m:     Uvicorn running on ...`) on a terminal that asked for none."""
from __future__ import annotations

import pytest
import uvicorn

from twotower.cli.serve_cmd import _serve_on
from twotower.utils.progress import colours_allowed


@pytest.mark.parametrize("env, allowed", [
    ({}, None), ({"NO_COLOR": "1"}, False), ({"NO_COLOR": ""}, None), ({"TERM": "dumb"}, False),
    ({"TERM": "xterm-256color"}, None),
])
def test_colours_follow_no_color_and_a_dumb_terminal(monkeypatch, env, allowed):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert colours_allowed() is allowed  # None: uvicorn decides (colours on a terminal), as before


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}])
def test_serve_hands_uvicorn_no_colours_when_asked(monkeypatch, env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: seen.append(self.config.use_colors))
    with pytest.raises(SystemExit):  # the fake run never started: serve's start-up failure exit
        _serve_on(object(), "127.0.0.1", 0, "info", [])
    assert seen == [False]
