"""Structural tests: the shape of the code, read with ``ast``; nothing is compiled.

* the module import graph of the installed packages ``npu_jax``, ``fusion`` and ``precision`` has no
  cycle, ``npu_jax`` never imports ``fusion`` or ``precision`` by an import statement (its CLI's
  command registry reaches them through importlib), and the layers of ``npu_jax`` (:data:`LAYERS`)
  import only downward;
* no import statement inside a function body, except of an optional dependency;
* no module over :data:`MAX_MODULE_LINES` lines;
* no cost constant typed outside ``npu_jax/hw/``: fractal / C0 arithmetic with a literal 16 or 32,
  element-size and alignment literals, and cycle arithmetic on start-up / rate figures (the table
  :data:`COST_PATTERNS` says what each pattern catches and why).

Each test lists every offender (``file:line: code``), not only the first, so one run shows the
whole job. The detectors themselves are tested on small snippets at the end of the file.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import pkgutil
import re
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import pytest

PACKAGES = ("npu_jax", "fusion", "precision")
MAX_MODULE_LINES = 500
# Top-level modules a function may import locally: optional dependencies, imported only where used
# so that ``import npu_jax`` works without them.
OPTIONAL_DEPENDENCIES = frozenset(
    {
        "matplotlib",
        "tqdm",
        "distributed",
        "pyarrow",
        "ray",
        "onnx",
        "onnxruntime",
        "torch",
        "torchvision",
        "rich",
        "yaml",
        "nbclient",
        "nbformat",
        "hypothesis",
    }
)
# Where the machine's numbers may be typed: everything else reads them from npu_jax.hw.
HW_PACKAGE = "npu_jax.hw"


# ---- the modules ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. "npu_jax.core.state"
    path: Path
    is_package: bool  # an __init__.py

    @property
    def package(self) -> str:
        """The package relative imports resolve against."""
        return self.name if self.is_package else self.name.rpartition(".")[0]

    @property
    def rel(self) -> str:
        """The path relative to the directory holding the top-level package (for messages)."""
        top = self.name.split(".")[0]
        parts = self.path.parts
        return str(Path(*parts[len(parts) - 1 - parts[::-1].index(top) :]))

    @property
    def source(self) -> str:
        return _read(self.path)

    @property
    def tree(self) -> ast.Module:
        return _parse(self.path)


@cache
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(_read(path), filename=str(path))


def _walk_package(name: str, paths) -> Iterator[Module]:
    for info in pkgutil.iter_modules(paths, name + "."):
        base = Path(info.module_finder.path)
        leaf = info.name.rpartition(".")[2]
        if info.ispkg:
            yield Module(info.name, base / leaf / "__init__.py", True)
            yield from _walk_package(info.name, [str(base / leaf)])
        else:
            yield Module(info.name, base / f"{leaf}.py", False)


@cache
def modules() -> dict[str, Module]:
    """Every module of the installed packages, found from the import system (no module is imported)."""
    found = {}
    for pkg in PACKAGES:
        spec = importlib.util.find_spec(pkg)
        assert spec is not None and spec.submodule_search_locations, f"package {pkg!r} is not importable"
        found[pkg] = Module(pkg, Path(spec.origin), True)
        for m in _walk_package(pkg, list(spec.submodule_search_locations)):
            found[m.name] = m
    return found


# ---- imports -------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Import:
    module: Module  # the importing module
    node: ast.Import | ast.ImportFrom
    targets: tuple[str, ...]  # absolute dotted names imported (a submodule where ``from p import sub``)
    in_function: bool  # inside a function or method body
    type_checking: bool  # under ``if TYPE_CHECKING:`` (never runs)

    @property
    def where(self) -> str:
        return f"{self.module.rel}:{self.node.lineno}: {ast.unparse(self.node)}"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(mod: Module, node: ast.Import | ast.ImportFrom, known) -> tuple[str, ...]:
    if isinstance(node, ast.Import):
        return tuple(a.name for a in node.names)
    if node.level:
        base = mod.package.split(".")
        base = base[: len(base) - (node.level - 1)]
        base = ".".join(base + ([node.module] if node.module else []))
    else:
        base = node.module
    # ``from pkg import sub``: the submodule when sub is one, else the package itself
    return tuple(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)


def imports_of(mod: Module) -> list[Import]:
    """Every import statement of ``mod``, at any depth, with absolute targets."""
    known = modules()
    out = []

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(Import(mod, node, _resolve(mod, node, known), in_function, type_checking))
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                visit(stmt, in_function, True)
            for stmt in node.orelse:
                visit(stmt, in_function, type_checking)
            return
        in_function = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, in_function, type_checking)

    visit(mod.tree, False, False)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of our packages it imports by a statement that runs (``TYPE_CHECKING``
    blocks never run, so they cannot close a cycle). Python importing a parent package before a
    submodule is not an edge: only what a statement names."""
    known = modules()
    graph = {name: set() for name in known}
    for mod in known.values():
        for imp in imports_of(mod):
            if not imp.type_checking:
                graph[mod.name].update(t for t in imp.targets if t in known)
    return graph


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on_stack, comps = {}, {}, [], set(), []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return comps


def _shortest_cycle_through(graph: dict[str, set[str]], start: str, comp: set[str]) -> list[str]:
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{start} is on no cycle")


def find_cycles(graph: dict[str, set[str]]) -> list[str]:
    """One shortest cycle through each module that is on a cycle, as chains ``a -> b -> a``
    (rotated to start at their least name, duplicates dropped)."""
    chains = set()
    for comp in _strongly_connected(graph):
        if len(comp) == 1 and comp[0] not in graph[comp[0]]:
            continue
        for v in comp:
            cyc = _shortest_cycle_through(graph, v, set(comp))[:-1]
            i = cyc.index(min(cyc))
            cyc = cyc[i:] + cyc[:i]
            chains.add(" -> ".join(cyc + [cyc[0]]))
    return sorted(chains)


def _report(title: str, offenders: list[str]) -> str:
    return f"{len(offenders)} {title}:\n  " + "\n  ".join(offenders)


def test_import_graph_has_no_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, _report("import cycles (module -> module it imports)", cycles)


def test_npu_jax_does_not_import_fusion_or_precision():
    """``fusion`` and ``precision`` are built on ``npu_jax``; the CLI's command registry reaches them
    by name through importlib, never by an import statement."""
    bad = [
        imp.where
        for name, mod in modules().items()
        if name.split(".")[0] == "npu_jax"
        for imp in imports_of(mod)
        if any(t.split(".")[0] in ("fusion", "precision") for t in imp.targets)
    ]
    assert not bad, _report("imports of fusion/precision from npu_jax", bad)


# The layers of npu_jax, lowest first: a module may import its own layer and those below.
# Modules under no prefix here (the root package, workloads, studies) are not ranked.
# A module's layer is its longest prefix here: the launch (core.run) builds the Report, whose module
# reads core's tables (pipes, sanitizers), so it sits above the report, and asc above the launch.
LAYERS = (
    "npu_jax.errors",
    "npu_jax.hw",
    "npu_jax.core",
    "npu_jax.report",
    "npu_jax.core.run",
    "npu_jax.asc",
    "npu_jax.workload",
    "npu_jax.mapping",
    "npu_jax.kernels",
    "npu_jax.cost",
    "npu_jax.search",
    "npu_jax.api",
    "npu_jax.model",
    "npu_jax.sweeps",
    "npu_jax.cli",
)


def _layer(name: str) -> int | None:
    ranks = [(len(p), rank) for rank, p in enumerate(LAYERS) if name == p or name.startswith(p + ".")]
    return max(ranks)[1] if ranks else None


def test_a_module_takes_its_longest_prefix_layer():
    assert _layer("npu_jax.core.pipes") < _layer("npu_jax.report.report") < _layer("npu_jax.core.run")
    assert _layer("npu_jax.core.run") < _layer("npu_jax.asc.launcher") < _layer("npu_jax.kernels.conv")
    assert _layer("npu_jax.core.runner") == _layer("npu_jax.core") and _layer("npu_jax") is None


def test_layers_import_downward():
    """hw -> core -> report -> the launch -> asc -> workload -> mapping -> kernels -> cost -> search -> api ->
    model -> sweeps -> CLI: nothing imports a layer above its own
    (the tiling chooser belongs to the search, the CLI's argument types to a module below the CLI)."""
    bad = [
        f"{imp.where}  ({LAYERS[_layer(name)]} imports {LAYERS[max(above)]})"
        for name, mod in sorted(modules().items())
        if _layer(name) is not None
        for imp in imports_of(mod)
        if (above := [_layer(t) for t in imp.targets if t in modules() and (_layer(t) or 0) > _layer(name)])
    ]
    assert not bad, _report(f"imports of a higher layer (order: {' < '.join(LAYERS)})", bad)


def _optional_dependency(imp: Import) -> bool:
    relative = isinstance(imp.node, ast.ImportFrom) and imp.node.level > 0
    return not relative and all(t.split(".")[0] in OPTIONAL_DEPENDENCIES for t in imp.targets)


def function_local_imports(mods=None) -> list[str]:
    mods = modules().values() if mods is None else mods
    return [
        imp.where
        for mod in mods
        for imp in imports_of(mod)
        if imp.in_function and not _optional_dependency(imp)
    ]


def test_no_function_local_imports():
    """An import inside a function hides a dependency (often a cycle) from the module's header;
    only optional dependencies may be imported where they are used."""
    bad = function_local_imports()
    assert not bad, _report(f"function-local imports (allowed only for {sorted(OPTIONAL_DEPENDENCIES)})", bad)


def test_no_module_over_limit():
    sizes = {m.rel: len(m.source.splitlines()) for m in modules().values()}
    bad = [
        f"{rel}: {n} lines" for rel, n in sorted(sizes.items(), key=lambda kv: -kv[1]) if n > MAX_MODULE_LINES
    ]
    assert not bad, _report(f"modules over {MAX_MODULE_LINES} lines", bad)


# ---- cost constants ----------------------------------------------------------------------------------
FRACTAL_LITERALS = (16, 32)  # fractal rows (M0 = N0 = 16), C0 = 32 B / itemsize, 32-B alignment
# Helpers that round or ceil by their second argument.
ROUNDING_CALL = re.compile(r"(^_r$|ceil|cdiv|round_up|align)", re.IGNORECASE)
# Module-level names that have held a typed-in cost constant.
CONSTANT_NAMES = re.compile(r"^(C0|K0|M0|N0|ISZ|VSZ|BIAS_SZ|FRACTAL\w*|\w*ITEMSIZE\w*)$")
FORMAT_NAMES = frozenset(
    {"fp32", "fp16", "bf16", "int8", "int32", "uint8", "fp8", "hf32", "float16", "float32"}
)
ELEMENT_SIZES = frozenset({1, 2, 4, 8})
# Attributes holding start-up cycles or rates (HardwareConfig, Assumed, HwNumbers): arithmetic on them
# computes cycles, which only npu_jax/hw/costs.py may do.
TIMING_ATTRIBUTE = re.compile(r"(_startup|_su|_bytes_per_cycle|_rate|^gm_burst_overhead|^burst|^chip_gm)$")
# Calls that only wrap a value (the attribute stays "used in arithmetic" through them).
WRAPPERS = frozenset({"float", "int", "asarray", "array", "float32", "int32"})

_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)


def _literal(node: ast.AST, values) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
        and node.value in values
    )


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _fractal_arithmetic(node: ast.AST, ctx) -> bool:
    """``32 // itemsize``, ``x // 16``, ``-(-x // 16) * 16``, ``x % 16``, ``m / 16``."""
    if not isinstance(node, ast.BinOp):
        return False
    if isinstance(node.op, (ast.FloorDiv, ast.Mult)):
        return _literal(node.left, FRACTAL_LITERALS) or _literal(node.right, FRACTAL_LITERALS)
    if isinstance(node.op, (ast.Mod, ast.Div)):
        return _literal(node.right, FRACTAL_LITERALS)
    return False


def _fractal_rounding_call(node: ast.AST, ctx) -> bool:
    """``_r(x, 16)``, ``cdiv(x, 16)``, ``ceil_div(x, 16)``, ``round_up(x, 32)``."""
    return (
        isinstance(node, ast.Call)
        and bool(ROUNDING_CALL.search(_call_name(node)))
        and any(_literal(a, FRACTAL_LITERALS) for a in node.args[1:])
    )


def _constant_name(node: ast.AST, ctx) -> bool:
    """``C0 = 16``, ``ISZ = 2`` at module level."""
    if not (isinstance(node, (ast.Assign, ast.AnnAssign)) and ctx.at_module_level(node)):
        return False
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return (
        node.value is not None
        and _literal(node.value, range(1 << 16))
        and any(isinstance(t, ast.Name) and CONSTANT_NAMES.match(t.id) for t in targets)
    )


def _itemsize_table(node: ast.AST, ctx) -> bool:
    """``{"fp16": 2, "fp32": 4}`` and ``dict(fp16=2, fp32=4)``: element sizes typed in."""
    if isinstance(node, ast.Dict):
        pairs = list(zip(node.keys, node.values))
        keys = [k.value if isinstance(k, ast.Constant) else None for k, _ in pairs]
    elif isinstance(node, ast.Call) and _call_name(node) == "dict" and not node.args:
        pairs = [(kw.arg, kw.value) for kw in node.keywords]
        keys = [k for k, _ in pairs]
    else:
        return False
    return (
        bool(pairs)
        and all(k in FORMAT_NAMES for k in keys)
        and all(_literal(v, ELEMENT_SIZES) for _, v in pairs)
    )


def _alignment_literal(node: ast.AST, ctx) -> bool:
    """``align=(32, 512, 512, 64, 32)`` (argument or default), ``l1_align = 32``: buffer alignments
    typed in."""

    def literal_ints(v) -> bool:
        items = v.elts if isinstance(v, (ast.Tuple, ast.List)) else [v]
        return bool(items) and all(_literal(e, range(2, 1 << 16)) for e in items)

    if isinstance(node, ast.keyword):
        return bool(node.arg) and "align" in node.arg.lower() and literal_ints(node.value)
    if isinstance(node, ast.arguments):  # def f(..., align=(32, 512)): a default
        pos = node.posonlyargs + node.args
        pairs = list(zip(pos[len(pos) - len(node.defaults) :], node.defaults))
        pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
        return any("align" in a.arg.lower() and literal_ints(d) for a, d in pairs)
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [
            t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""
            for t in targets
        ]
        return any("align" in n.lower() for n in names) and literal_ints(node.value)
    return False


def _timing_arithmetic(node: ast.AST, ctx) -> bool:
    """``hw.assumed.mte2_startup + ...``, ``... * a.gm_burst_overhead``, ``n / hw.l0a_rate``:
    cycles computed outside :mod:`npu_jax.hw.costs` (an argument of a costs function is fine)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, _ARITH)) or ctx.inside_costs_call(node):
        return False

    def timing(v: ast.AST) -> bool:
        while True:
            if isinstance(v, ast.UnaryOp):
                v = v.operand
            elif isinstance(v, ast.Call) and _call_name(v) == "astype" and isinstance(v.func, ast.Attribute):
                v = v.func.value  # x.astype(...)
            elif isinstance(v, ast.Call) and _call_name(v) in WRAPPERS and len(v.args) == 1:
                v = v.args[0]  # float(x), jnp.asarray(x)
            else:
                return isinstance(v, ast.Attribute) and bool(TIMING_ATTRIBUTE.search(v.attr))

    return timing(node.left) or timing(node.right)


@dataclasses.dataclass(frozen=True)
class CostPattern:
    name: str
    why: str
    match: Callable[[ast.AST, _Context], bool]


class _Context:
    """Parents of every node of one module, and the names it binds to npu_jax.hw.costs."""

    def __init__(self, tree: ast.Module):
        self.parent = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        self.costs_modules, self.costs_functions = {"npu_jax.hw.costs"}, set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("costs"):
                self.costs_functions |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                self.costs_modules |= {a.asname or a.name for a in node.names if a.name == "costs"}
            elif isinstance(node, ast.Import):
                self.costs_modules |= {a.asname for a in node.names if a.name.endswith(".costs") and a.asname}

    def at_module_level(self, node: ast.AST) -> bool:
        p = self.parent.get(node)
        while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            p = self.parent.get(p)
        return p is None

    def inside_costs_call(self, node: ast.AST) -> bool:
        p = self.parent.get(node)
        while p is not None and not isinstance(p, ast.stmt):
            if isinstance(p, ast.Call):
                f = p.func
                if isinstance(f, ast.Name) and f.id in self.costs_functions:
                    return True
                if isinstance(f, ast.Attribute) and ast.unparse(f.value) in self.costs_modules:
                    return True
            p = self.parent.get(p)
        return False


COST_PATTERNS = (
    CostPattern(
        "fractal arithmetic",
        "16 is a fractal's rows (M0 = N0) and 32 B a fractal row (C0 = 32 // itemsize): read them from hw "
        "(hw.c0, FRACTAL_ROWS, costs.cdiv / round_up with hw numbers)",
        _fractal_arithmetic,
    ),
    CostPattern(
        "fractal rounding call",
        "rounding a size up to 16 / 32 is the hardware's fractal or alignment rule, which lives in npu_jax/hw",
        _fractal_rounding_call,
    ),
    CostPattern(
        "cost constant name",
        "C0 / ISZ / VSZ / BIAS_SZ typed at module level freeze one element size or channel block for every "
        "config; they are functions of (hw, format)",
        _constant_name,
    ),
    CostPattern(
        "element-size table",
        "element sizes per format are written once (npu_jax.core.buffers / hw); a second table drifts",
        _itemsize_table,
    ),
    CostPattern(
        "alignment literal",
        "buffer alignments are HardwareConfig fields (l1_align, ...); a typed copy ignores a custom config",
        _alignment_literal,
    ),
    CostPattern(
        "cycle arithmetic",
        "start-ups, burst overheads and rates combine into cycles only in npu_jax/hw/costs.py",
        _timing_arithmetic,
    ),
)


def cost_constant_offenders(source: str, rel: str) -> list[tuple[str, str]]:
    """(pattern name, ``file:line: code``) for each line of ``source`` a cost pattern matches; a line
    several patterns match is listed once, under the first in :data:`COST_PATTERNS`."""
    tree = ast.parse(source)
    ctx, lines, hits = _Context(tree), source.splitlines(), {}
    for node in ast.walk(tree):
        for rank, pat in enumerate(COST_PATTERNS):
            if pat.match(node, ctx):
                line = node.lineno if hasattr(node, "lineno") else ctx.parent[node].lineno  # ast.arguments
                hits[line] = min(hits.get(line, rank), rank)
    return [
        (COST_PATTERNS[r].name, f"{rel}:{line}: {lines[line - 1].strip()}")
        for line, r in sorted(hits.items())
    ]


def _outside_hw(name: str) -> bool:
    return not (name == HW_PACKAGE or name.startswith(HW_PACKAGE + "."))


def test_no_cost_constant_outside_hw():
    found = [
        (pat, where)
        for name, mod in sorted(modules().items())
        if _outside_hw(name)
        for pat, where in cost_constant_offenders(mod.source, mod.rel)
    ]
    why = {p.name: p.why for p in COST_PATTERNS}
    msg = [
        _report(f"x {pat} ({why[pat]})", [w for p, w in found if p == pat])
        for pat in why
        if any(p == pat for p, _ in found)
    ]
    assert not found, f"{len(found)} cost constants typed outside npu_jax/hw/:\n" + "\n".join(msg)


# ---- the detectors on snippets ---------------------------------------------------------------------------
def _patterns_hit(src: str) -> set[str]:
    return {pat for pat, _ in cost_constant_offenders(src, "m.py")}


@pytest.mark.parametrize(
    "src, pattern",
    [
        ("c0 = 32 // itemsize(op)", "fractal arithmetic"),
        ("m = -(-x // 16) * 16", "fractal arithmetic"),
        ("ok = t.n % 16 == 0", "fractal arithmetic"),
        ("a = soft_ceil(m / 16)", "fractal arithmetic"),
        ("b = _r(cols, 16)", "fractal rounding call"),
        ("b = exact._cdiv(L.k, 16)", "fractal rounding call"),
        ("b = ste_round_up(x * isz, 32)", "fractal rounding call"),
        ("C0 = 16", "cost constant name"),
        ("ISZ: int = 2", "cost constant name"),
        ("SIZES = {'fp16': 2, 'bf16': 2, 'fp32': 4}", "element-size table"),
        ("SIZES = dict(fp16=2, fp32=4)", "element-size table"),
        ("f(align=(32, 512, 512, 64, 32))", "alignment literal"),
        ("def needs(L, align=(32, 512, 512, 64, 32)):\n    pass", "alignment literal"),
        ("c = hw.assumed.mte2_startup + n", "cycle arithmetic"),
        ("c = bursts * a.gm_burst_overhead", "cycle arithmetic"),
        ("c = nbytes / hw.l1_to_l0a_bytes_per_cycle", "cycle arithmetic"),
        ("c = jnp.ceil(b / float(h.l0a_rate)) + h.mte1_su", "cycle arithmetic"),
        ("c = n * hw.assumed.mte3_startup.astype(jnp.float32)", "cycle arithmetic"),
    ],
)
def test_cost_pattern_catches(src, pattern):
    assert pattern in _patterns_hit(src)


@pytest.mark.parametrize(
    "src",
    [
        "x = np.zeros((16, 32))",  # a shape, not arithmetic
        "y = bits << 16",
        "lo = 32 - shift",
        "r = 2.0**32",
        "n = hw.l1_bytes // 2",
        "def f():\n    C0 = 16\n    return C0",  # not module level (still a poor idea, but not this rule)
        "FORMATS = {'fp16': (5, 10), 'fp32': (8, 23)}",
        "c = costs.dma(h, nbytes, bursts, h.gm / n, h.mte2_su)",
        "from npu_jax.hw.costs import dma\nc = dma(h, nbytes, 1, h.gm * 2, h.mte2_su)",
        "ok = hw.mte2_startup > 0",
        "r = hw.gm_rate(n) * 2",  # a method of hw: the rule stays there
    ],
)
def test_cost_pattern_passes(src):
    assert not _patterns_hit(src)


def test_cycle_finder_names_the_chain():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert find_cycles(graph) == ["a -> b -> c -> a", "e -> e"]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_import_resolution(tmp_path):
    pkg = tmp_path / "npu_jax" / "core"
    pkg.mkdir(parents=True)
    src = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from . import state\n"  # a submodule
        "from .state import Core\n"  # a name in a module
        "from .. import errors\n"
        "from npu_jax.core import run\n"
        "import npu_jax.hw.costs\n"
        "if TYPE_CHECKING:\n"
        "    from npu_jax.report import report\n"
        "def f():\n"
        "    import matplotlib.pyplot as plt\n"
        "    from npu_jax import fusion_free\n"
    )
    (pkg / "sanitize.py").write_text(src)
    mod = Module("npu_jax.core.sanitize", pkg / "sanitize.py", False)
    imps = imports_of(mod)
    targets = [i.targets for i in imps if not i.type_checking]
    assert targets[2:7] == [
        ("npu_jax.core.state",),
        ("npu_jax.core.state",),
        ("npu_jax.errors",),
        ("npu_jax.core.run",),
        ("npu_jax.hw.costs",),
    ]
    assert [i.targets for i in imps if i.type_checking] == [("npu_jax.report.report",)]
    assert function_local_imports([mod]) == [f"{mod.rel}:12: from npu_jax import fusion_free"]
