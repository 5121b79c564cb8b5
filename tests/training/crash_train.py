"""`twotower train` with a fault-injection point, for the crash-safety tests (issue 7).

    python crash_train.py POINT NTH MARKER -- <twotower train arguments>

POINT is where the process parks (so the test can SIGKILL it exactly there)
on its NTH visit: ``checkpoint-write`` (inside the checkpoint's temporary
folder, after the weights and before the optimizer state), ``checkpoint-swap``
(inside ``atomic_dir``: right after the atomic exchange on Linux, or after
the previous checkpoint was moved aside and before the new one is moved in
where the two-rename fallback is used), ``weights-write`` (the best
``model.safetensors`` half written to its temporary file) or ``none``. On
arrival it creates MARKER and sleeps; the test kills it.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def park(marker: str) -> None:
    Path(marker).write_text(str(os.getpid()))
    time.sleep(120)


def main() -> int:
    point, nth, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    argv = sys.argv[sys.argv.index("--") + 1 :]
    visits = {"n": 0}

    def arrive() -> None:
        visits["n"] += 1
        if visits["n"] == nth:
            park(marker)

    if point == "checkpoint-write":
        import twotower.training.checkpoint as ck

        real_save = ck.torch.save

        class TorchProxy:
            def __getattr__(self, name):
                return getattr(ck.__dict__["_real_torch"], name)

            @staticmethod
            def save(obj, path, *a, **k):
                arrive()
                return real_save(obj, path, *a, **k)

        ck.__dict__["_real_torch"] = ck.torch
        ck.torch = TorchProxy()
    elif point == "checkpoint-swap":
        import twotower.utils.atomic as at

        real_replace = at.os.replace

        class OsProxy:
            def __getattr__(self, name):
                return getattr(os, name)

            @staticmethod
            def replace(src, dst, *a, **k):
                real_replace(src, dst, *a, **k)
                if ".checkpoint.old." in str(dst):
                    arrive()

        at.os = OsProxy()
        real_exchange = at._rename_exchange

        def exchange(a, b):  # Linux: one atomic swap; park right after it, before the old copy is removed
            done = real_exchange(a, b)
            if done and Path(b).name == "checkpoint":
                arrive()
            return done

        at._rename_exchange = exchange
    elif point == "weights-write":
        import twotower.training.checkpoint as ck

        real_file = ck.save_file

        def save_file(state, path, *a, **k):
            real_file(state, path, *a, **k)
            if ".model.safetensors." in str(path) and "checkpoint" not in str(path):
                with open(path, "r+b") as fh:  # leave the temporary file half written
                    fh.truncate(os.path.getsize(path) // 2)
                arrive()

        ck.save_file = save_file
    from twotower.cli.main import main as cli

    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())
