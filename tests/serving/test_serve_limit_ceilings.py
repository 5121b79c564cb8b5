"""`serve --max-concurrency` and `--max-body-bytes` have a ceiling, named before the run loads.

Both took 1e12 as given: every request admitted in a thread of its own (no 429 ever), and a body of any size read
whole. Big-but-plausible values are still served.
"""

from __future__ import annotations

import pytest

from twotower.cli.main import main
from twotower.errors import ConfigError
from twotower.serving.settings import ServiceSettings


@pytest.mark.parametrize("flag, said", [
    ("--max-concurrency", "between 1 and 1024"),
    ("--max-body-bytes", "between 64 and 1073741824"),
])
def test_serve_refuses_an_absurd_limit_before_loading(flag, said, tmp_path, capsys):
    # the run does not exist: the flag is refused first
    assert main(["serve", "--run", str(tmp_path / "nope"), "--port", "0", flag, "1000000000000"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {flag}: must be {said}, got 1000000000000"


def test_the_settings_keep_the_ceilings_and_accept_values_up_to_them():
    with pytest.raises(ConfigError, match=r"^ServiceSettings\.max_concurrency must be between 1 and 1024"):
        ServiceSettings(max_concurrency=1025)
    with pytest.raises(ConfigError, match=r"^ServiceSettings\.max_body_bytes must be between 64 and 1073741824"):
        ServiceSettings(max_body_bytes=(1 << 30) + 1)
    big = ServiceSettings(max_concurrency=1024, max_body_bytes=1 << 30, max_queue=1_000_000, max_batch=100_000)
    assert big.max_in_flight == 1_001_024
