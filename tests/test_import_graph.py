"""The shape of the library: an import graph with no cycle and no import running back up the
layers that docs/ARCHITECTURE.md names (deferred imports inside functions count too), and the
house's size limits."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Where each installed package's files are (model/ and baselines/ install as equibench.*).
PACKAGE_DIRS = {"equibench": ROOT / "equibench", "equibench.model": ROOT / "model",
                "equibench.baselines": ROOT / "baselines"}
#: The layers, lowest first: a module imports only its own layer and those below
#: (docs/ARCHITECTURE.md, "Import layers").
LAYERS = [
    ("shared", ["_lazy", "_version", "errors", "atomic_files", "outdir_lock", "worker_guard", "progress", "tables",
                "figures", "machine", "devices", "frames", "normalize", "equivariance_metric"]),
    ("networks and prior", ["model", "prior"]),
    ("classifier", ["preprocessing", "classifier", "official"]),
    ("pretraining", ["pretrain"]),
    ("evaluation", ["baselines", "tasks", "evaluate", "scoring"]),
    ("reporting", ["report", "equivariance", "boundaries"]),
    ("command line", ["cli", "__main__", "__init__"]),
]
LAYER_OF = {part: index for index, (_, parts) in enumerate(LAYERS) for part in parts}


def _modules() -> dict[str, Path]:
    modules = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in folder.rglob("*.py"):
            if "recipes" in path.parts:
                continue
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            modules[name] = path
    return modules


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The library modules ``name`` imports, anywhere in its file (a package import counts as
    its ``__init__``; ``from pkg import sub`` as the submodule)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> nx.DiGraph:
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        graph.add_edges_from((name, target) for target in _imports(name, path, set(modules)))
    return graph


def _layer(module: str) -> int:
    part = module.removeprefix("equibench.").split(".")[0] if module != "equibench" else "__init__"
    return LAYER_OF[part]


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    return _graph()


def test_every_module_has_a_layer(graph):
    unplaced = sorted(module for module in graph if module != "equibench"
                      and module.removeprefix("equibench.").split(".")[0] not in LAYER_OF)
    assert unplaced == []


def test_the_library_has_no_import_cycle(graph):
    # a package's __init__ re-exporting its submodules is not a cycle of the design
    edges = [(a, b) for a, b in graph.edges if not (b.startswith(a + ".") and _modules()[a].name == "__init__.py")]
    cycles = [sorted(c) for c in nx.strongly_connected_components(nx.DiGraph(edges)) if len(c) > 1]
    assert cycles == []


def test_no_import_runs_back_up_the_layers(graph):
    upward = sorted(f"{a} -> {b}" for a, b in graph.edges if _layer(b) > _layer(a))
    assert upward == []


def test_the_check_sees_deferred_and_relative_imports():
    modules = _modules()
    imports = _imports("equibench.pretrain.run", modules["equibench.pretrain.run"], set(modules))
    assert "equibench.pretrain.validation" in imports and "equibench.errors" in imports


#: The house's size limits (docs/ARCHITECTURE.md): a module does one job, a function one step.
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 450, 100


def test_no_module_or_function_outgrows_the_house_limits():
    too_long = []
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert too_long == []
