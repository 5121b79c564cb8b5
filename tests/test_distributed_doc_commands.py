"""Every command docs/distributed.md shows parses as it stands, with each flag spelt in full: the ``twotower``
arguments (also those run under ``torchrun`` / ``python -m torch.distributed.run``) with the CLI's parser, the
launcher's own options with torchrun's. The README's check (tests/test_readme_commands.py) over this page."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_readme_commands import (
    _bash_commands,
    _flags_by_command,
    _inline_commands,
    _launcher_options,
    _unknown_flags,
    _unparsed,
)

DOC = (Path(__file__).resolve().parents[1] / "docs" / "distributed.md").read_text(encoding="utf-8")


def test_the_page_shows_the_one_machine_several_machines_and_index_commands():
    commands = _bash_commands(DOC)
    assert len(commands) >= 8 and len(_launcher_options(DOC)) >= 6
    assert any(c.startswith("index build --run-dir") for c in commands)
    assert any("--resume" in c for c in commands)


@pytest.mark.parametrize("command", _bash_commands(DOC))
def test_each_twotower_command_of_the_page_parses(command):
    # the resume line said `<same overrides>`, which no shell passes on as overrides
    assert _unparsed(command) == []


def test_each_twotower_flag_of_the_page_is_spelt_in_full():
    assert _unknown_flags(_flags_by_command(_bash_commands(DOC))) == []
    assert _unknown_flags(_inline_commands(DOC)) == []


@pytest.mark.parametrize("options", _launcher_options(DOC), ids=" ".join)
def test_each_torchrun_option_of_the_page_parses_and_is_spelt_in_full(options):
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    args, extra = parser.parse_known_args([*options, "-m", "twotower"])  # exits (status 2) on a bad value
    assert extra == [] and args.module and args.training_script == "twotower"
    # torchrun takes prefixes too (`--run` for its `--run-path`, docs/distributed.md says), so a renamed flag would
    # still parse the page's old spelling
    assert [w for w in options if w.startswith("--") and w not in parser._option_string_actions] == []


def test_the_page_s_python_snippet_builds_an_index_of_the_run_s_item_vectors(tmp_path, monkeypatch):
    """The page's ``build_index_distributed`` snippet runs as written (in one process: ``init_from_env`` without
    torchrun's variables is one rank) with the names its comment says to provide, and saves an index that loads
    with the run's fingerprint and answers with the run's item vectors."""
    import re

    import twotower as tt
    from tests.serving.tiny_run import build_tiny_run
    from twotower.index import load_index

    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    code = re.search(r"```python\n(.*?)```", DOC, re.S).group(1)
    run = tt.TrainedRun.load(build_tiny_run(tmp_path / "run"))
    namespace = {"model": run.model, "fingerprint": run.fingerprint(), "run_dir": run.dir}
    exec(compile(code, "docs/distributed.md", "exec"), namespace)  # noqa: S102 - our own page
    index = load_index(run.dir / "index", expected_fingerprint=run.fingerprint())
    items = run.item_embeddings()
    hits = index.search(items[:3], k=1)
    assert hits.ids[:, 0].tolist() == [0, 1, 2]
