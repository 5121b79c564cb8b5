"""A fit stopped by Ctrl-C (or SIGTERM) draws curves.png of the epochs it finished, as a diverged fit does."""
from __future__ import annotations

from tests.synthetic import write_dataset
from tests.training.test_resume_best_weights import _train


def test_an_interrupted_fit_draws_the_curves_of_its_finished_epochs(tmp_path, monkeypatch):
    from twotower.training.trainer import Trainer

    data = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    real_epoch = Trainer._run_epoch

    def ctrl_c_in_epoch_3(self, epoch):
        if epoch == 3:
            raise KeyboardInterrupt
        return real_epoch(self, epoch)

    monkeypatch.setattr(Trainer, "_run_epoch", ctrl_c_in_epoch_3)
    out = tmp_path / "run"
    assert _train(data, out, 5) == 130
    assert (out / "curves.png").stat().st_size > 1000  # epochs 1-2, drawn; before, no curves.png at all


#: A fresh interpreter draws the curves of an interrupted fit while a second Ctrl-C lands inside one of matplotlib's
#: C extensions as it initialises: the interrupt is tripped and the extension's init run in one chain of C calls,
#: so no bytecode checks it in between (a pybind11 init that runs Python code then meets it)
SECOND_CTRL_C_IN_IMPORT = r"""
import ctypes, functools, importlib.machinery, operator, sys, types, _imp
from pathlib import Path

real_create = importlib.machinery.ExtensionFileLoader.create_module

def create(self, spec):
    if spec.name != "matplotlib.ft2font":
        return real_create(self, spec)
    calls = [ctypes.pythonapi.PyErr_SetInterrupt, functools.partial(_imp.create_dynamic, spec)]
    return list(map(operator.call, calls))[1]

importlib.machinery.ExtensionFileLoader.create_module = create
from twotower.training.hooks import draw_curves

run = types.SimpleNamespace(out_dir=Path(sys.argv[1]), history=[{"epoch": 1, "loss": 5.0, "inbatch_accuracy": 0.1}],
                            eval_cfg=types.SimpleNamespace(select_metric="NDCG@10"),
                            loss_cfg=types.SimpleNamespace(kind="inbatch"))
try:
    draw_curves(run, 1, stopped="stopped in epoch 2")
    print("drawn")
except KeyboardInterrupt:
    print("interrupted")
"""


def test_a_second_ctrl_c_while_the_curves_import_matplotlib_ends_the_run_without_a_fatal_error(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, MPLCONFIGDIR=str(tmp_path / "mpl"), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", SECOND_CTRL_C_IN_IMPORT, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120)
    # the import finished and the interrupt came after it; before, pybind11 made it an ImportError ("could not
    # draw training curves: initialization failed"), and the half-made module aborted the interpreter at its exit
    # ("Fatal Python error: PyThreadState_Get", status 134)
    assert "Fatal Python error" not in done.stderr
    assert "could not draw training curves" not in done.stderr
    assert (done.returncode, done.stdout.strip()) == (0, "interrupted"), done.stderr
