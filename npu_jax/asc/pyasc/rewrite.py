"""The one rewrite ``asc.jit`` makes to a kernel's source: ``with X.iterate(...) as count:`` becomes
``for count in X.iterate(...):``.

pyasc compiles ``with matmul.iterate() as count:`` to a device loop over the Matmul's base blocks
(its ``__enter__`` opens the loop, its ``__exit__`` closes it); Python would run the body once. The
rewrite runs it once per block, ``count`` 0, 1, ...: the function is recompiled from its source with
the same file, lines, globals and closure cells, so findings and tracebacks name the user's lines.
Functions without such a ``with`` (or without source) are left as they are.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types

_MAKER = "_pyasc_closure"


class _IterateToFor(ast.NodeTransformer):
    def __init__(self):
        self.changed = False

    def visit_With(self, node: ast.With):
        self.generic_visit(node)
        if len(node.items) != 1:
            return node
        item = node.items[0]
        call = item.context_expr
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "iterate"
        ):
            return node
        self.changed = True
        target = item.optional_vars or ast.Name("_", ast.Store())
        return ast.copy_location(ast.For(target=target, iter=call, body=node.body, orelse=[]), node)


def _code(code: types.CodeType, name: str) -> types.CodeType | None:
    for c in code.co_consts:
        if isinstance(c, types.CodeType) and c.co_name == name:
            return c
    return None


def rewrite_iterate(fn):
    """``fn`` with each ``with <expr>.iterate(...) [as v]:`` turned into ``for v in <expr>.iterate(...):``
    (the same function when it has none)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return fn
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, ast.FunctionDef) or fdef.name != fn.__name__:
        return fn
    t = _IterateToFor()
    t.visit(fdef)
    if not t.changed:
        return fn
    fdef.decorator_list = []
    free = fn.__code__.co_freevars
    body: ast.stmt = fdef
    if free:  # compiled inside a function of the free names, so that they stay free (closure cells)
        args = ast.arguments(
            posonlyargs=[], args=[ast.arg(v) for v in free], kwonlyargs=[], kw_defaults=[], defaults=[]
        )
        body = ast.FunctionDef(_MAKER, args, [fdef, ast.Return(ast.Name(fdef.name, ast.Load()))], [], None)
    module = ast.Module([body], [])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, fn.__code__.co_firstlineno - 1)  # line 1 of the source is its first line
    code = compile(module, fn.__code__.co_filename, "exec")
    if free:
        code = _code(code, _MAKER)
    inner = _code(code, fn.__name__)
    cells = dict(zip(free, fn.__closure__ or ()))
    closure = tuple(cells[v] for v in inner.co_freevars) or None
    new = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__annotations__ = dict(fn.__annotations__)
    new.__qualname__, new.__module__, new.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    new.__dict__.update(fn.__dict__)
    return new
