"""A SIGTERM while `twotower` imports its package (numpy, the config: about 0.1 s) stops it as one a moment later
does: "terminated (SIGTERM)" and 143, not a silent death (status -15).

Walk: `timeout -s TERM 0.05 twotower index info --run RUN` ended with status -15 and no message: the console
script (``twotower.cli.main:main``) and ``python -m twotower`` imported ``twotower`` first, whose ``__init__``
loaded numpy and the config (``twotower.utils`` imported ``runtime``, ``twotower.results`` numpy), all before
``main()`` set the handler. The signal is sent here by the import of numpy itself, wherever it happens.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

# a finder that sends the real SIGTERM when numpy is first imported, then lets the import go on
CODE = """
import os, signal, sys

class SigtermOnNumpy:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGTERM)
        return None

sys.meta_path.insert(0, SigtermOnNumpy())
sys.argv = ["twotower", "index", "info", "--run", sys.argv[1]]
"""
ENTRIES = {
    "console-script": "from twotower.cli.main import main\nsys.exit(main())\n",  # what pip's `twotower` script runs
    "python-m": "import runpy\nrunpy.run_module('twotower', run_name='__main__', alter_sys=True)\n",
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_sigterm_while_the_package_is_imported(entry, tmp_path):
    out = subprocess.run([sys.executable, "-c", CODE + ENTRIES[entry], str(tmp_path / "RUN")], capture_output=True,
                         text=True, timeout=120)
    assert (out.returncode, out.stderr) == (143, "terminated (SIGTERM)\n")
