"""``python -m equibench``: the same command line as ``equibench``."""

from .cli import app

app(prog_name="equibench")
