"""docs/ARCHITECTURE.md stays a true map: its module table names every library module once,
with the import layer that tests/test_import_graph.py enforces, and its "Import layers" list
is that test's ``LAYERS``."""

from __future__ import annotations

import re

from test_import_graph import LAYERS, ROOT, _layer, _modules

DOC = ROOT / "docs" / "ARCHITECTURE.md"
LAYER_NAMES = [name for name, _ in LAYERS]


def _section(text: str, heading: str) -> str:
    start = text.index(heading) + len(heading)
    end = text.find("\n#", start)
    return text[start:] if end < 0 else text[start:end]


def _module_name(path: str) -> str:
    """The installed module of a path as the table writes it: relative to ``equibench/``, except
    the top-level ``model/`` and ``baselines/`` (``equibench.model``, ``equibench.baselines``)."""
    parts = path.removesuffix(".py").split("/")
    return ".".join(("equibench", *parts)).removesuffix(".__init__")


def table_rows(text: str) -> list[tuple[str, str]]:
    """(module, layer) for every module path in the module column of the table of "Modules, in
    the order the data flows" (columns: stage, module, layer, one job)."""
    lines = [line for line in _section(text, "## Modules, in the order the data flows").splitlines()
             if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    module_col, layer_col = header.index("module"), header.index("layer")
    rows = []
    for line in lines[2:]:  # past the header and its |---| line
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        paths = re.findall(r"`([^`]+\.py)`", cells[module_col])
        assert paths, f"a row of the module table names no module: {line}"
        rows += [(_module_name(path), cells[layer_col]) for path in paths]
    return rows


def table_problems(text: str) -> dict[str, list[str]]:
    """What the module table of ``text`` gets wrong against the library: modules without a row,
    rows of no module, modules listed twice, rows whose layer is not the import graph's."""
    listed: dict[str, list[str]] = {}
    for module, layer in table_rows(text):
        listed.setdefault(module, []).append(layer)
    modules = _modules()
    return {
        "missing": sorted(set(modules) - set(listed)),
        "unknown": sorted(set(listed) - set(modules)),
        "twice": sorted(module for module, layers in listed.items() if len(layers) > 1),
        "wrong layer": sorted(f"{module}: {layers[0]!r}, the import graph's layer is {LAYER_NAMES[_layer(module)]!r}"
                              for module, layers in listed.items()
                              if module in modules and layers[0] != LAYER_NAMES[_layer(module)]),
    }


def test_every_library_module_has_one_row_with_its_import_layer():
    assert table_problems(DOC.read_text(encoding="utf-8")) == {"missing": [], "unknown": [], "twice": [],
                                                                "wrong layer": []}


def test_the_import_layers_list_is_the_import_graph_tests():
    section = _section(DOC.read_text(encoding="utf-8"), "## Import layers")
    items = re.findall(r"^\d+\. ([^:\n]+): (.*?)(?=^\d+\. |^\s*$)", section, flags=re.M | re.S)
    documented = [(name, sorted(part.removesuffix("/") for part in re.findall(r"`([^`]+)`", parts)))
                  for name, parts in items]
    assert documented == [(name, sorted(parts)) for name, parts in LAYERS]


def test_the_check_fails_on_a_missing_row_or_a_wrong_layer():
    text = DOC.read_text(encoding="utf-8")
    without = "\n".join(line for line in text.splitlines() if "`pretrain/prefetch.py`" not in line)
    assert table_problems(without)["missing"] == ["equibench.pretrain.prefetch"]
    moved = text.replace("| `classifier/context_rules.py` | classifier |", "| `classifier/context_rules.py` | shared |")
    assert table_problems(moved)["wrong layer"] == [
        "equibench.classifier.context_rules: 'shared', the import graph's layer is 'classifier'"]
    doubled = text.replace("| | `machine.py` |", "| | `machine.py`, `normalize.py` |")
    assert table_problems(doubled)["twice"] == ["equibench.normalize"]
