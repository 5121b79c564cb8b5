"""Regressions found by fuzzing the command line (issue 7): user mistakes are one `error:` line and exit 2."""
from __future__ import annotations

import pytest

from twotower.cli.main import main


@pytest.mark.parametrize(
    "argv",
    [
        ["recommend", "--run", "x", "--user", "u1", "--k", "ten"],  # argparse type error
        ["evaluate"],  # required argument missing
        ["train", "--bogus"],  # unknown flag
        ["nope"],  # unknown subcommand
    ],
)
def test_argparse_errors_return_2_instead_of_raising_system_exit(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1 and "Traceback" not in err


def test_help_returns_0(capsys):
    assert main(["--help"]) == 0
    assert "usage: twotower" in capsys.readouterr().out


@pytest.mark.parametrize("threads", ["-1", "0"])
def test_threads_below_one_is_an_error_not_a_torch_runtime_error(threads, capsys, tmp_path):
    assert main(["recommend", "--run", str(tmp_path), "--user", "u1", "--threads", threads]) == 2
    assert capsys.readouterr().err.strip() == f"error: --threads: must be between 1 and 1024, got {threads}"


def test_bad_twotower_threads_env_is_an_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TWOTOWER_THREADS", "lots")
    assert main(["recommend", "--run", str(tmp_path), "--user", "u1"]) == 2
    assert "TWOTOWER_THREADS must be an integer from 1 to 1024" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["recommend", "--run", "RUN", "--user", "u1"], ["evaluate", "--run", "RUN"],
                                  ["index", "build", "--run", "RUN"]])
def test_a_bad_twotower_threads_env_is_not_read_where_threads_is_given(argv, capsys, tmp_path, monkeypatch):
    # --threads wins over the variable, which was refused all the same ("TWOTOWER_THREADS must be ...")
    monkeypatch.setenv("TWOTOWER_THREADS", "abc")
    assert main([str(tmp_path / "nope") if a == "RUN" else a for a in argv] + ["--threads", "1"]) == 2
    err = capsys.readouterr().err
    assert "TWOTOWER_THREADS" not in err and "nope" in err, err  # refused for the run that is not there


@pytest.mark.parametrize("argv", [
    ["evaluate", "--run", "RUN"], ["recommend", "--run", "RUN", "--user", "u1"], ["export", "--run", "RUN", "--out", "O"],
    ["index", "build", "--run", "RUN"], ["search", "query", "--index", "RUN", "q"]])
def test_a_huge_thread_count_is_refused_by_flag_not_a_torch_overflow(argv, capsys, tmp_path):
    # 99999999999999999999 passed the >= 1 check and reached torch.set_num_threads: "Overflow when unpacking long"
    argv = [str(tmp_path) if a == "RUN" else str(tmp_path / "o") if a == "O" else a for a in argv]
    assert main(argv + ["--threads", "99999999999999999999"]) == 2
    assert capsys.readouterr().err.strip() == "error: --threads: must be between 1 and 1024, got a number of 20 digits"
    assert not (tmp_path / "o").exists()


def test_a_huge_thread_count_env_or_setting_is_refused_by_name(capsys, tmp_path, monkeypatch):
    from twotower.config import TrainConfig
    from twotower.errors import ConfigError
    from twotower.utils.runtime import set_threads

    monkeypatch.setenv("TWOTOWER_THREADS", str(2**31))
    assert main(["recommend", "--run", str(tmp_path), "--user", "u1"]) == 2
    assert "TWOTOWER_THREADS must be an integer from 1 to 1024, got '2147483648'" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="train.threads"):
        TrainConfig(threads=2**31)
    with pytest.raises(ConfigError, match="threads: expected at most 1024"):
        set_threads(2**31)


def test_serve_on_a_taken_port_says_so_before_loading(tmp_path, capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        # the run does not exist: the port is checked first, in one line naming --port
        assert main(["serve", "--run", str(tmp_path / "nope"), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"port {port} on 127.0.0.1 is already in use" in err and "--port" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("flags", "said"),
    [(["--max-k", "0"], "--max-k: must be between 1 and 10000 (twotower.config.MAX_K), got 0"),
     (["--max-k", "20000"], "--max-k: must be between 1 and 10000 (twotower.config.MAX_K), got 20000"),  # config.MAX_K, the CLI's bound
     (["--time-budget", "-1"], "--time-budget: must be more than 0 and at most 3600 (seconds), got -1"),
     (["--max-body-bytes", "10"], "--max-body-bytes: must be between 64 and 1073741824, got 10"),
     (["--workers", "0"], "--workers: must be between 1 and 1024, got 0")],
)
def test_serve_names_the_flag_it_refuses(tmp_path, capsys, flags, said):
    """`serve --max-k 0` said "ServiceSettings.max_k must be >= 1": a name the command-line user never typed."""
    assert main(["serve", "--run", str(tmp_path / "nope"), *flags]) == 2
    err = capsys.readouterr().err
    assert said in err and "ServiceSettings" not in err, err


@pytest.mark.parametrize("ks, said", [
    ("0", "--ks: must be at least 1, got 0"),
    ("0,5", "--ks: item 1 of 2: must be at least 1, got 0"),
    ("10,0", "--ks: item 2 of 2: must be at least 1, got 0"),
    ("-5", "--ks: must be at least 1, got -5"),
    ("10,5.5", "--ks: item 2 of 2: must be an integer, got '5.5'"),
    (",", "--ks: an empty list; give the cut-offs, e.g. --ks 10,20, or leave --ks out for the run's eval.ks"),
])
def test_evaluate_ks_below_one_names_the_flag_before_loading(ks, said, capsys, tmp_path):
    # was "EvalProtocol.ks must hold positive integers", after the run had loaded; then "--ks must hold positive
    # integers such as 10,20, got '0,5'", unlike every other flag's "--flag: ..." (the words of --k 0 and --history)
    assert main(["evaluate", "--run", str(tmp_path / "nope"), "--ks", ks]) == 2
    assert capsys.readouterr().err.strip() == f"error: {said}"


def test_a_repeated_cut_off_is_refused_naming_the_flag_or_the_setting(capsys, tmp_path):
    # evaluate said "EvalProtocol.ks has duplicates" after the run had loaded; train accepted eval.ks=[10, 10],
    # trained the whole run and then failed its evaluation with that message
    assert main(["evaluate", "--run", str(tmp_path / "nope"), "--ks", "10,10"]) == 2
    assert capsys.readouterr().err.strip() == "error: --ks: '10,10' names a cut-off twice"
    assert main(["train", "--dataset", "movielens-100k", "--out", str(tmp_path / "r"), "--print-config",
                 "eval.ks=[10,10]"]) == 2
    assert capsys.readouterr().err.strip() == ("error: command line: 'eval.ks=[10,10]': eval.ks: names a cut-off twice: "
                                               "[10, 10]")


def test_a_huge_cut_off_is_refused_naming_the_flag_or_the_setting_before_any_work(capsys, tmp_path):
    # evaluate loaded the run, then died in numpy ("Maximum allowed dimension exceeded"); train accepted
    # eval.ks=[99999999999999999999], trained the whole run and then died the same way, leaving a run without metrics
    assert main(["evaluate", "--run", str(tmp_path / "nope"), "--ks", "10,99999999999999999999"]) == 2
    assert capsys.readouterr().err.strip() == ("error: --ks: item 2 of 2: must be at most 10000 (twotower.config.MAX_K), "
                                               "got a number of 20 digits")
    assert main(["train", "--dataset", "movielens-100k", "--out", str(tmp_path / "r"), "--print-config",
                 "eval.ks=[10,99999999999999999999]"]) == 2
    assert capsys.readouterr().err.strip() == ("error: command line: 'eval.ks=[10,99999999999999999999]': eval.ks: must "
                                               "be at most 10000, got 99999999999999999999")


def test_explain_negative_top_names_the_flag_before_loading(capsys, tmp_path):
    # was "explain top: expected an integer >= 0", raised by the explainer after the run had loaded
    assert main(["explain", "--run", str(tmp_path / "nope"), "--user", "u1", "--item", "i1", "--top", "-2"]) == 2
    assert capsys.readouterr().err.strip() == "error: --top: must be at least 0 (history items listed), got -2"


@pytest.mark.parametrize("host", ["0.0.0.0", "0", "0.0.0.00"])
def test_serve_warns_for_every_spelling_of_the_wildcard_address(tmp_path, capsys, host):
    """`serve --host 0` binds 0.0.0.0 (every interface) as uvicorn binds it, but only the spellings "0.0.0.0" and
    "::" were warned about: the unauthenticated service went on the network in silence."""
    assert main(["serve", "--run", str(tmp_path / "nope"), "--host", host, "--port", "0"]) == 2  # the run is missing
    assert f"WARNING: binding {host} exposes the service to every network" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_serve_does_not_warn_for_loopback(tmp_path, capsys, host):
    assert main(["serve", "--run", str(tmp_path / "nope"), "--host", host, "--port", "0"]) == 2
    assert "WARNING" not in capsys.readouterr().err
