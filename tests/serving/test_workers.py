"""`twotower serve --workers 2` as a real subprocess on 127.0.0.1: both workers answer, the answers match the
in-process service, both map the same vector and index files (one copy), and a saturated gate answers 429."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import httpx
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="reads /proc/PID/maps (Linux)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mapped(pid: int) -> dict[str, str]:
    """Mapped file path -> its device:inode, from /proc/PID/maps."""
    out = {}
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/"):
            out[parts[5]] = f"{parts[3]}:{parts[4]}"
    return out


@pytest.fixture(scope="module")
def flat_index(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved FAISS Flat index of the tiny run (exact, so answers match the in-process exact service)."""
    from twotower.index import FaissIndex
    from twotower.pipeline.artifacts import TrainedRun

    run = TrainedRun.load(run_dir)
    folder = tmp_path_factory.mktemp("flat") / "index"
    FaissIndex("Flat").build(run.item_embeddings(), np.arange(run.n_items)).save(folder,
                                                                                 model_fingerprint=run.fingerprint())
    return folder


@pytest.fixture(scope="module")
def server(run_dir: Path, flat_index: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """Two workers, each admitting one request at a time (max_concurrency 1, max_queue 0)."""
    port = _free_port()
    cmd = [sys.executable, "-m", "twotower", "serve", "--run", str(run_dir), "--index", str(flat_index),
           "--workers", "2", "--port", str(port), "--max-concurrency", "1", "--max-queue", "0",
           "--log-level", "warning"]
    env = dict(os.environ, TWOTOWER_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180  # two workers import torch and load the run on shared cores
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"serve --workers 2 exited with {proc.returncode}:\n{proc.stdout.read()}")
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail("serve --workers 2 was not ready in 180 s")
            time.sleep(0.5)
        yield url, proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    out = proc.stdout.read()
    assert "2 workers map the vectors" in out, out
    # the shared folder goes away with the server
    assert not list(Path(tempfile.gettempdir()).glob(f"twotower-serve-{proc.pid}-*")), out


def _pids_seen(url: str, rounds: int = 60) -> set[int]:
    """Worker pids named by /healthz over bursts of 8 concurrent fresh connections (until two are seen)."""
    pids: set[int] = set()
    lock = threading.Lock()

    def hit() -> None:
        pid = httpx.get(url + "/healthz", timeout=10).json()["pid"]
        with lock:
            pids.add(pid)

    for _ in range(rounds):
        threads = [threading.Thread(target=hit) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if len(pids) >= 2:
            break
    return pids


def test_two_workers_answer_and_map_one_copy(server, service, flat_index):
    from twotower.serving import RecRequest

    url, proc = server
    pids = _pids_seen(url)
    assert len(pids) == 2 and proc.pid not in pids  # the parent only supervises
    r = httpx.post(url + "/recommend", json={"user_id": "u1", "k": 10}, timeout=10)
    assert r.status_code == 200
    assert r.json()["items"] == service.recommend(RecRequest(user_id="u1", k=10))["items"]
    maps = [_mapped(p) for p in sorted(pids)]
    for name in ("item_vectors.npy", "user_vectors.npy"):
        paths = [{p: ino for p, ino in m.items() if p.endswith("/" + name)} for m in maps]
        assert len(paths[0]) == 1 and paths[0] == paths[1], name  # the same file (path and inode) in both
    shared_dir = Path(next(iter(paths[0]))).parent
    assert shared_dir.name.startswith("twotower-serve-")
    faiss_file = str(flat_index / "index.faiss")
    assert all(faiss_file in m for m in maps)  # the FAISS codes are mapped too, not read into each worker
    assert maps[0][faiss_file] == maps[1][faiss_file]


def test_keep_alive_connections_opened_together_reach_both_workers(server):
    """A client's pool of keep-alive connections, opened at once: on one shared socket the worker that woke first
    accepted them all, and the other idled for as long as they lived (8 connections: 2 workers served what 1
    did, bench/serve_scaling.py). With a socket a worker the kernel spreads them (all 16 on one: p = 2^-15)."""
    import http.client
    import json

    from twotower.serving.listen import reuse_port_spreads

    if not reuse_port_spreads():
        pytest.skip("the kernel spreads connections over SO_REUSEPORT sockets on Linux only")
    url, _ = server
    host, port = url.split("//")[1].split(":")
    conns = [http.client.HTTPConnection(host, int(port), timeout=30) for _ in range(16)]
    try:
        for c in conns:
            c.connect()
        pids = []
        for _ in range(2):  # each connection asked twice: kept alive, it stays with its worker
            for c in conns:
                c.request("GET", "/healthz")
                pids.append(json.loads(c.getresponse().read())["pid"])
    finally:
        for c in conns:
            c.close()
    assert len(set(pids)) == 2, pids
    assert pids[:16] == pids[16:]


def test_the_serving_process_only_supervises_without_the_loaded_run(server):
    """After the load and the checks the serving process (same pid, which Ctrl-C and kill reach) is a fresh
    interpreter running uvicorn's supervisor: it kept torch, FAISS and the run before, 234 MB of private memory on
    MovieLens-100K with 2 workers, as much as a worker, for nothing."""
    url, proc = server
    assert httpx.get(url + "/healthz", timeout=10).status_code == 200
    mapped = _mapped(proc.pid)
    assert not [p for p in mapped if "libtorch" in p or "swigfaiss" in p], sorted(mapped)
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
    assert b"twotower.serving.workers" in cmdline


def test_metrics_count_every_workers_requests_whichever_worker_answers_the_scrape(server):
    """Each worker counted only its own requests: successive scrapes of the one address read one worker or the
    other (207, then 94, then 207 requests on MovieLens-100K), which Prometheus takes as counter resets."""
    import re

    url, _ = server
    sent = 0
    for _ in range(6):  # bursts of fresh connections: both workers answer some
        threads = [threading.Thread(target=lambda: httpx.get(url + "/openapi.json", timeout=30)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sent += len(threads)
    time.sleep(2.5)  # a worker publishes its last counts within a second of its last request
    pattern = re.compile(r'^twotower_requests_total\{route="/openapi.json",method="GET",status="200"\} (\d+)$', re.M)
    seen = set()
    for _ in range(16):  # fresh connections: the scrapes land on both workers
        text = httpx.get(url + "/metrics", timeout=10).text
        seen.add(int(pattern.search(text)[1]))
    assert seen == {sent}


def test_saturated_workers_answer_429_at_once(server):
    """64 batches at once on two one-at-a-time workers: the excess is refused with 429, nothing fails."""
    url, _ = server
    body = {"requests": [{"user_id": f"u{u % 40}", "k": 50} for u in range(256)]}
    for _ in range(3):  # in practice the first burst already overlaps
        barrier = threading.Barrier(64)
        results: list[tuple[int, float]] = []
        lock = threading.Lock()

        def send() -> None:
            with httpx.Client(timeout=30) as c:
                barrier.wait()
                t0 = time.perf_counter()
                status = c.post(url + "/recommend/batch", json=body).status_code
                with lock:
                    results.append((status, time.perf_counter() - t0))

        threads = [threading.Thread(target=send) for _ in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = [s for s, _ in results]
        assert set(statuses) <= {200, 429} and len(statuses) == 64
        if 429 in statuses:
            break
    assert statuses.count(429) > 0 and statuses.count(200) > 0
    assert max(sec for s, sec in results if s == 429) < 10  # generous: refused before any work, not queued
    assert httpx.get(url + "/healthz", timeout=10).status_code == 200
    assert httpx.post(url + "/recommend", json={"user_id": "u2", "k": 5}, timeout=10).status_code == 200


def test_worker_settings_and_spec_errors_are_clear(tmp_path, monkeypatch):
    from twotower.errors import ConfigError
    from twotower.serving import ServiceSettings
    from twotower.serving.workers import SPEC_ENV, WorkerSpec, run_workers, worker_app

    with pytest.raises(ConfigError, match="workers must be between 1 and 1024, got 0"):
        ServiceSettings(workers=0)
    with pytest.raises(ConfigError, match="at least 2 workers"):
        run_workers(WorkerSpec(shared_dir=str(tmp_path), settings={}), workers=1)
    bad = tmp_path / "spec.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="spec.json: cannot read the worker spec"):
        WorkerSpec.read(bad)
    monkeypatch.delenv(SPEC_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"{SPEC_ENV} is not set"):
        worker_app()


def test_shared_service_without_a_saved_index_is_exact_over_the_mapped_vectors(run_dir, service, tmp_path):
    """No saved index: each worker searches exactly over the mapped item vectors (no copy), same answers."""
    from dataclasses import asdict

    from twotower.errors import IntegrityError
    from twotower.index import ExactIndex
    from twotower.serving import RecRequest, ServiceSettings
    from twotower.serving.workers import WorkerSpec, open_shared_service, share_arrays

    share_arrays(service, tmp_path)
    spec = WorkerSpec(shared_dir=str(tmp_path), settings=asdict(ServiceSettings()), run_dir=str(run_dir),
                      fingerprint=service.fingerprint)
    shared = open_shared_service(spec)
    assert isinstance(shared.index, ExactIndex)
    assert str(tmp_path / "item_vectors.npy") in Path("/proc/self/maps").read_text()
    assert np.shares_memory(shared.index.vectors, shared.item_vectors)  # one mapping for index and service
    for user in ("u0", "u7", "u39"):
        req = RecRequest(user_id=user, k=10)
        assert shared.recommend(req)["items"] == service.recommend(req)["items"]
    bad = WorkerSpec(**{**asdict(spec), "fingerprint": "0" * 64})
    with pytest.raises(IntegrityError, match="changed since the server started"):
        open_shared_service(bad)


def test_a_worker_that_cannot_load_the_run_stops_the_server_instead_of_restarting_forever(
        run_dir, service, tmp_path, monkeypatch, caplog):
    """uvicorn restarts a worker that died; when the run folder changed meanwhile (retrained in place) the new
    worker's load fails, and with exit code 1 uvicorn restarted it forever: a traceback and a run load (torch,
    weights) every few seconds on the serving machine. Start-up failure code 3 makes uvicorn stop the server."""
    from dataclasses import asdict

    from uvicorn.config import STARTUP_FAILURE

    from twotower.serving import ServiceSettings
    from twotower.serving.workers import SPEC_ENV, WorkerSpec, share_arrays, worker_app

    share_arrays(service, tmp_path)
    spec = WorkerSpec(shared_dir=str(tmp_path), settings=asdict(ServiceSettings()), run_dir=str(run_dir),
                      fingerprint="0" * 32)  # the run the server started with is not the one on disk now
    monkeypatch.setenv(SPEC_ENV, str(spec.write()))
    with pytest.raises(SystemExit) as stopped:
        worker_app()
    assert stopped.value.code == STARTUP_FAILURE
    said = [r.getMessage() for r in caplog.records if r.levelname == "CRITICAL"]
    assert len(said) == 1 and "changed since the server started" in said[0] and "restart `twotower serve`" in said[0]

    # uvicorn's supervisor then returns normally: `twotower serve` exits non-zero with the reason
    import uvicorn

    from twotower.errors import IntegrityError
    from twotower.serving.workers import run_workers

    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: None)  # the supervisor, after the worker's failure
    with pytest.raises(IntegrityError, match="a worker could not start: .*changed since the server started"):
        run_workers(spec, workers=2)
    assert not tmp_path.exists()  # the shared folder is removed all the same


def test_a_worker_that_fails_to_start_for_any_reason_stops_the_server(run_dir, service, tmp_path, monkeypatch,
                                                                      caplog):
    """Not only a changed run: a worker whose shared arrays were removed from the temporary folder (a /tmp cleaner
    under a long-running server, then a worker restart) raised FileNotFoundError, and uvicorn restarted it forever
    (6 tracebacks and run loads in 40 s on MovieLens-100K) while the server went on with a worker fewer."""
    from dataclasses import asdict

    from uvicorn.config import STARTUP_FAILURE

    from twotower.serving import ServiceSettings
    from twotower.serving.workers import FAILED, ITEM_VECTORS, SPEC_ENV, WorkerSpec, share_arrays, worker_app

    share_arrays(service, tmp_path)
    (tmp_path / ITEM_VECTORS).unlink()
    spec = WorkerSpec(shared_dir=str(tmp_path), settings=asdict(ServiceSettings()), run_dir=str(run_dir),
                      fingerprint=service.fingerprint)
    monkeypatch.setenv(SPEC_ENV, str(spec.write()))
    with pytest.raises(SystemExit) as stopped:
        worker_app()
    assert stopped.value.code == STARTUP_FAILURE
    said = [r.getMessage() for r in caplog.records if r.levelname == "CRITICAL"]
    assert len(said) == 1 and "cannot start, so the server stops: FileNotFoundError" in said[0]
    assert ITEM_VECTORS in (tmp_path / FAILED).read_text(encoding="utf-8")  # what run_workers exits with


def test_worker_log_lines_name_their_process(tmp_path, monkeypatch):
    """A worker is a spawned interpreter that never ran the CLI's logging set-up: its INFO lines were dropped and
    its warnings printed bare (`worker 812: the serving process 790 is gone; stopping`), uvicorn's lines said no
    pid. The logging configuration run_workers hands uvicorn (applied again in each worker) tags every line."""
    import json
    import logging
    import subprocess
    import sys

    import uvicorn

    from twotower.serving.workers import WorkerSpec, run_workers

    given = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: given.update(kw))
    monkeypatch.setattr(logging.getLogger(), "level", logging.INFO)  # the CLI's default level
    run_workers(WorkerSpec(shared_dir=str(tmp_path), settings={}), workers=2)
    worker = (  # what a fresh worker process logs once uvicorn applied the configuration
        "import json, logging, logging.config, os, sys; logging.config.dictConfig(json.loads(sys.argv[1])); "
        "print(os.getpid(), flush=True); "
        "logging.getLogger('twotower.serving.service').info('service ready'); "
        "logging.getLogger('twotower.serving.workers').warning('the serving process is gone'); "
        "logging.getLogger('faiss.loader').info('Loading faiss with AVX2 support.'); "
        "logging.getLogger('uvicorn.error').info('Waiting for application startup.')"
    )
    out = subprocess.run([sys.executable, "-c", worker, json.dumps(given["log_config"])], capture_output=True,
                         text=True, check=True)
    pid = out.stdout.strip()
    lines = out.stderr.splitlines()
    assert any(line.endswith(f"[{pid}] INFO twotower.serving.service: service ready") for line in lines), lines
    assert any(f"[{pid}] WARNING twotower.serving.workers: the serving process is gone" in ln for ln in lines), lines
    assert any(f"[{pid}] Waiting for application startup." in line for line in lines), lines
    assert not any("faiss" in line for line in lines), lines  # quiet, as the CLI keeps it in its own process


def test_a_worker_stops_when_its_serving_process_is_killed(tmp_path):
    """`kill -9` of `serve --workers N` must not leave its workers serving as orphans (holding the port), nor the
    shared arrays in the temporary folder (they stayed until the next `--workers` start swept them)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from twotower.serving.workers import make_shared_dir

    shared = make_shared_dir()
    (shared / "item_vectors.npy").write_bytes(b"x" * 1000)
    child = ("import time; from twotower.serving.workers import exit_with_parent; "
             f"exit_with_parent(0.05, shared={str(shared)!r}); time.sleep(60)")
    parent = ("import subprocess, sys, time; "
              f"p = subprocess.Popen([sys.executable, '-c', {child!r}]); print(p.pid, flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    worker = int(proc.stdout.readline())
    time.sleep(1.0)  # the worker is up and watching
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            assert not shared.exists()
            return  # gone
        time.sleep(0.05)
    os.kill(worker, signal.SIGKILL)
    raise AssertionError("the worker outlived its serving process")


def test_a_worker_removes_only_a_shared_folder_the_server_made(tmp_path):
    """The folder an orphaned worker removes comes from the spec's path (TWOTOWER_SERVE_SPEC): one pointed at
    by hand is never removed."""
    from twotower.serving.workers import _own_shared_dir, make_shared_dir

    shared = make_shared_dir()
    try:
        assert _own_shared_dir(str(shared / "spec.json")) == shared
        assert _own_shared_dir(str(tmp_path / "spec.json")) is None
        assert _own_shared_dir(str(shared / "other.json")) is None
        assert _own_shared_dir(None) is None
    finally:
        shared.rmdir()


def test_every_serve_start_sweeps_what_a_killed_server_left(tmp_path, monkeypatch):
    """A `--workers` server killed with its workers (kill -9 of the process group) leaves its folder of shared
    arrays; a start without --workers swept nothing, a later `--workers` start alone did."""
    import subprocess
    import sys
    import tempfile

    from twotower.serving import workers

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()  # a pid no process has now
    left = Path(tempfile.gettempdir()) / f"twotower-serve-{gone}-test"
    left.mkdir()
    (left / "item_vectors.npy").write_bytes(b"x")
    mine = workers.make_shared_dir()  # this process's own: alive, kept
    try:
        workers.sweep_shared_dirs()
        assert not left.exists() and mine.exists()
    finally:
        mine.rmdir()
        if left.exists():
            (left / "item_vectors.npy").unlink()
            left.rmdir()


def test_a_worker_refuses_an_index_rebuilt_since_the_server_started(run_dir, service, tmp_path):
    # a rebuild for the same model passes the fingerprint check: a restarted worker would have answered from
    # the new index while the others kept the old one
    from dataclasses import asdict

    from twotower.errors import IntegrityError
    from twotower.index import FaissIndex
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.serving import ServiceSettings
    from twotower.serving.workers import WorkerSpec, index_digest, open_shared_service, share_arrays

    run = TrainedRun.load(run_dir)
    folder = tmp_path / "index"
    FaissIndex("Flat").build(run.item_embeddings(), np.arange(run.n_items)).save(folder,
                                                                                 model_fingerprint=run.fingerprint())
    shared = tmp_path / "shared"
    shared.mkdir()
    share_arrays(service, shared)
    spec = WorkerSpec(shared_dir=str(shared), settings=asdict(ServiceSettings()), run_dir=str(run_dir),
                      fingerprint=service.fingerprint, index_dir=str(folder), index_digest=index_digest(folder))
    assert len(open_shared_service(spec).index) == run.n_items  # the index as the server started with it
    FaissIndex("IVF2,Flat").build(run.item_embeddings(), np.arange(run.n_items)).save(
        folder, model_fingerprint=run.fingerprint())  # rebuilt in place, same model
    with pytest.raises(IntegrityError, match=r"the index in .* changed since the server started"):
        open_shared_service(spec)


def test_serve_help_says_which_limits_are_per_worker(capsys):
    """--max-concurrency, --max-queue and --max-wait-ms apply to each worker process under --workers N (each has
    its own 429 gate); only --workers' help said so, for the first two."""
    import re

    from twotower.cli.main import main

    assert main(["serve", "--help"]) == 0
    text = re.sub(r"\s+", " ", capsys.readouterr().out)
    for flag in ("--max-concurrency MAX_CONCURRENCY", "--max-queue MAX_QUEUE", "--max-wait-ms MAX_WAIT_MS"):
        described = text.split(f" {flag} ", 1)[1].split(" --", 1)[0]
        assert "per worker process" in described or "each worker process" in described, (flag, described)

