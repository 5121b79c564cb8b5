"""`twotower serve` stopped by a signal ends the same way with one process or with --workers 2: SIGTERM ends it
as the signal does (143 in a shell; uvicorn re-raises it in the single process), Ctrl-C with "interrupted" and 130.
The workers' supervisor returned normally from both, so `kill` of a `--workers 2` server exited 0, as a clean
finish; the single process exited 0 without a word on Ctrl-C (uvicorn caught the KeyboardInterrupt it re-raised)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("workers", "sig", "status"), [
    (1, signal.SIGTERM, -signal.SIGTERM),
    (1, signal.SIGINT, 130),
    (2, signal.SIGTERM, -signal.SIGTERM),
    (2, signal.SIGINT, 130),
])
def test_a_stopped_server_exits_with_the_signals_status_whatever_its_workers(run_dir, workers, sig, status):
    port = _free_port()
    cmd = [sys.executable, "-m", "twotower", "serve", "--run", str(run_dir), "--workers", str(workers),
           "--port", str(port), "--log-level", "warning"]
    env = dict(os.environ, TWOTOWER_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 180
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"serve exited with {proc.returncode} before it was ready:\n{proc.stdout.read()}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail("serve was not ready in 180 s")
            time.sleep(0.5)
        proc.send_signal(sig)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = proc.stdout.read()
    assert proc.returncode == status, out
    if sig == signal.SIGINT:  # the line every command a Ctrl-C stops ends with (the supervisor said nothing)
        assert out.splitlines()[-1:] == ["interrupted"], out
    assert not list(Path(tempfile.gettempdir()).glob(f"twotower-serve-{proc.pid}-*")), out
