"""``python -m equibench.cli``: the same command line as ``equibench``."""

from . import app

app(prog_name="equibench")
