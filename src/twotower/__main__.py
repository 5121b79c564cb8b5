"""`python -m twotower` is the `twotower` command (so `torchrun -m twotower ...` works)."""
import sys

from twotower.cli.main import main

sys.exit(main())
