"""The notebooks and the examples use only public names.

A name is public when it is reached from a public root (``npu_jax``, ``fusion``, ``precision``) by
attributes that each module on the way lists in its ``__all__``: ``npu_jax.presets.ascend910b``,
``npu_jax.search.baselines``, ``from npu_jax.workload import RESNET50_REFERENCE``. A private path
(``from npu_jax.api.conv import conv2d``, ``npu_jax.report.plot.lanes_used``) fails, with the path.
Past the first object that is not a module (a class, a function) attributes are that object's own.
"""

from __future__ import annotations

import ast
import importlib
import json
import pathlib
import types

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
ROOTS = ("npu_jax", "fusion", "precision")


def _sources() -> list[pathlib.Path]:
    return sorted((REPO / "notebooks").glob("*.ipynb")) + sorted((REPO / "examples").rglob("*.py"))


def _code(path: pathlib.Path) -> str:
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    lines = [line for c in cells if c["cell_type"] == "code" for line in "".join(c["source"]).splitlines()]
    # IPython's magics and shell lines are not Python
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)


def _chain(node: ast.Attribute) -> list[str] | None:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(names)]


def used_paths(code: str) -> set[str]:
    """Every dotted path into a public root the code imports or reads (names bound by its imports
    expanded: ``from npu_jax import asc`` then ``asc.TPipe`` is ``npu_jax.asc.TPipe``)."""
    tree = ast.parse(code)
    bound: dict[str, str] = {}
    paths: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ROOTS:
                    paths.add(a.name)
                    bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] in ROOTS:
            for a in node.names:
                if a.name != "*":
                    paths.add(f"{node.module}.{a.name}")
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):
        chain = _chain(node) if isinstance(node, ast.Attribute) else None
        if chain and chain[0] in bound:
            paths.add(".".join([bound[chain[0]], *chain[1:]]))
    return paths


def private_hop(path: str) -> str | None:
    """The first hop of ``path`` that is not public (``"npu_jax.api"``), or None."""
    names = path.split(".")
    obj = importlib.import_module(names[0])
    for k, name in enumerate(names[1:], 1):
        if not isinstance(obj, types.ModuleType):
            return None
        if name not in getattr(obj, "__all__", ()):
            return ".".join(names[: k + 1])
        try:
            obj = getattr(obj, name)
        except AttributeError:
            obj = importlib.import_module(".".join(names[: k + 1]))
    return None


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_notebooks_and_examples_use_public_names(path):
    private = sorted({hop for p in used_paths(_code(path)) if (hop := private_hop(p))})
    assert not private, (
        f"{path.relative_to(REPO)} reaches private names {private}: import them from where the package "
        f"re-exports them (a name a module lists in __all__), or add them to that __all__ if they are public."
    )


def test_the_rule_refuses_a_private_path_and_takes_a_public_one():
    code = "import npu_jax\nfrom npu_jax.api.conv import conv2d\nnpu_jax.presets.ascend910b()\n"
    assert used_paths(code) >= {"npu_jax.api.conv.conv2d", "npu_jax.presets.ascend910b"}
    assert private_hop("npu_jax.api.conv.conv2d") == "npu_jax.api"
    assert private_hop("npu_jax.report.plot.lanes_used") == "npu_jax.report.plot"
    assert private_hop("npu_jax.presets.ascend910b") is None
    assert private_hop("npu_jax.Checks.parse") is None  # past a class, its own attributes
    assert private_hop("npu_jax.asc.TPipe") is None


def test_every_public_name_resolves():
    """Every name a public module lists in ``__all__`` is there (lazy ones load), down the public
    modules reached that way."""
    seen, todo = set(), [importlib.import_module(r) for r in ROOTS]
    while todo:
        mod = todo.pop()
        if mod.__name__ in seen:
            continue
        seen.add(mod.__name__)
        for name in mod.__all__:
            try:
                obj = getattr(mod, name)
            except AttributeError:
                obj = importlib.import_module(f"{mod.__name__}.{name}")
            if isinstance(obj, types.ModuleType) and obj.__name__.split(".")[0] in ROOTS:
                assert hasattr(obj, "__all__"), f"{mod.__name__}.{name} is public and lists no __all__"
                todo.append(obj)
    assert {"npu_jax.asc", "npu_jax.search.baselines", "precision.network", "npu_jax.model.zoo"} <= seen
