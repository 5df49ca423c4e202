"""Installation: one import namespace, the CLI entry point."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
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


@pytest.mark.slow
def test_a_wheel_carries_each_checkpoint_with_its_scorecard_and_info_reads_them(tmp_path):
    """Built from a copy of the sources, the wheel holds <checkpoint>.json beside each packaged .pt,
    and `info`, imported from the unpacked wheel (no checkout around it), reads them."""
    root, source = Path(__file__).parents[1], tmp_path / "source"
    for name in ("equibench", "model", "baselines"):
        shutil.copytree(root / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(tmp_path / "wheel"), str(source)], check=True, capture_output=True)
    with zipfile.ZipFile(next((tmp_path / "wheel").glob("equibench-*.whl"))) as wheel:
        names = set(wheel.namelist())
        wheel.extractall(tmp_path / "site")
    checkpoints = sorted(path.name for path in (root / "model").glob("*.pt"))
    assert checkpoints and {f"equibench/model/{name}" for name in checkpoints} <= names
    assert {f"equibench/model/{Path(name).stem}.json" for name in checkpoints} <= names
    code = ("import json, equibench; from equibench.cli.reporting import info_data; "
            "print(json.dumps([equibench.__file__, [card['quality'] for card in info_data()['checkpoints']]]))")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(tmp_path / "site")})
    where, qualities = json.loads(result.stdout)
    assert Path(where).is_relative_to(tmp_path / "site") and len(qualities) == len(checkpoints)
    assert all(Path(quality["source"]).is_relative_to(tmp_path / "site") and "error" not in quality
               for quality in qualities)
