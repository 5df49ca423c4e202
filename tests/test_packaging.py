"""Installation: one import namespace, the CLI entry point."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

import equibench
from equibench.cli import app


def test_single_import_namespace(tmp_path):
    code = (
        "import importlib.util, equibench.model, equibench.baselines;"
        "print(importlib.util.find_spec('model') is None, importlib.util.find_spec('baselines') is None)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "True"]


def test_every_package_folder_is_listed_for_the_wheel():
    root = Path(__file__).parents[1]
    packages = re.search(r"^packages = \[(.*?)\]", (root / "pyproject.toml").read_text(), re.M | re.S)
    listed = set(re.findall(r'"([\w.]+)"', packages.group(1)))  # tomllib needs Python 3.11
    folders = {"equibench." + init.parent.relative_to(root / "equibench").as_posix().replace("/", ".")
               for init in (root / "equibench").glob("*/**/__init__.py")}
    assert folders and folders <= listed, f"add {sorted(folders - listed)} to [tool.setuptools] packages"


def test_public_api():
    assert {"EquiTabPFNClassifier", "TabPFNStarClassifier", "__version__"} <= set(dir(equibench))


def test_info_command():
    result = CliRunner().invoke(app, ["info"])
    assert result.exit_code == 0, result.output
    assert equibench.__version__ in result.output and "torch" in result.output


def test_info_lists_packaged_checkpoints_and_flags_broken_ones(monkeypatch, tmp_path):
    shutil.copy(Path(__file__).parent / "data" / "tiny-equitabpfn.pt", tmp_path / "equitabpfn-tiny.pt")
    (tmp_path / "tabpfn-star-tiny.pt").write_bytes(b"broken")
    monkeypatch.setattr("equibench.model.checkpoint.packaged_checkpoint_dir", lambda: tmp_path)
    monkeypatch.setattr("equibench.cli.output.console", Console(width=400))
    result = CliRunner().invoke(app, ["info"])
    assert result.exit_code == 0, result.output
    assert "equitabpfn-tiny.pt" in result.output and "40,785" in result.output
    assert "unreadable" in result.output
