"""A problem's tests, prepared once in the judge process: compiled with their asserts
instrumented for messages, plain calls found and batched.
"""

from __future__ import annotations

import ast
import math
import builtins
from typing import Any

from execrl.sandbox._exchange import _STRUCT_LEN, _dumps, _Exchange
from execrl.sandbox._judge_compare import _short
from execrl.sandbox._judge_side import _JudgeSide

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

_BUILTIN_NAMES = frozenset(dir(builtins))
_JUDGE_MODULES = ("math", "cmath")
"""Always the judge's own modules, whatever the program binds to these names."""


# --------------------------------------------------------------------------------------
# A problem, prepared once: the tests compiled with their asserts instrumented for messages
# --------------------------------------------------------------------------------------

class _AssertInfo:
    """What a failure message of one assert shows: the expected side as written (for
    ``x == literal``) and the program's calls in it (``sites``, numbered). The text is made
    from the tree when a message needs it, not for every problem."""

    __slots__ = ("_expected", "sites")

    def __init__(self, expected: ast.expr | None, sites: list[list]) -> None:
        self._expected, self.sites = expected, sites

    @property
    def expected(self) -> str | None:
        node = self._expected
        if isinstance(node, ast.AST):
            self._expected = node = _short(ast.unparse(node))
        return node

    def site_text(self, i: int) -> str:
        site = self.sites[i]
        if isinstance(site[1], ast.AST):
            site[1] = _short(ast.unparse(site[1]), 120)
        return site[1]


def _names(tree: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """The names a tree loads, the names it binds, and the modules it imports (packages too)."""
    loaded: set[str] = set()
    stored: set[str] = set()
    imported: set[str] = set()
    Name, arg, defs, handler = ast.Name, ast.arg, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef), \
        ast.ExceptHandler
    for n in ast.walk(tree):
        if isinstance(n, Name):
            (loaded if isinstance(n.ctx, ast.Load) else stored).add(n.id)
        elif isinstance(n, arg):
            stored.add(n.arg)
        elif isinstance(n, defs):
            stored.add(n.name)
        elif isinstance(n, handler):
            if n.name:
                stored.add(n.name)
        elif isinstance(n, ast.Import):
            stored.update((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
            for a in n.names:
                imported.update(_packages(a.name))
        elif isinstance(n, ast.ImportFrom):
            stored.update((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
            if n.module and not n.level:
                imported.update(_packages(n.module))
    return loaded, stored, imported


def _packages(dotted: str) -> list[str]:
    """The modules ``import a.b.c`` loads: ``a``, ``a.b``, ``a.b.c``."""
    parts = dotted.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts) + 1)]


def _plain_literal(node: ast.AST) -> bool:
    """An expected side that can be shown as written: literals, and builtins applied to them."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id not in _BUILTIN_NAMES:
            return False
        if isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
    return True


def _where(at: ast.AST) -> dict:
    return {"lineno": at.lineno, "col_offset": at.col_offset, "end_lineno": getattr(at, "end_lineno", None),
            "end_col_offset": getattr(at, "end_col_offset", None)}


def _call(name: str, at: ast.AST, *args: ast.expr) -> ast.Call:
    """``name(*args)``, placed where ``at`` is (the compiler needs every node placed; placing
    the new nodes here spares a pass over the whole tree)."""
    where = _where(at)
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load(), **where), args=list(args), keywords=[], **where)


def _number(j: int, at: ast.AST) -> ast.Constant:
    return ast.Constant(j, **_where(at))


class _Instrument(ast.NodeTransformer):
    """Rewrites every ``assert`` so that a failure can say what was compared, without
    changing what it evaluates: ``assert t, m`` becomes ``__execrl_enter__(j)`` then
    ``assert t', __execrl_fail__(j, m)``, where ``t'`` is ``t`` with the values of the
    program's calls (sites) and of the compared side noted as they are computed."""

    def __init__(self, free: set[str], asserts: list[_AssertInfo], n_sites: list[int], at: int | None = None) -> None:
        self.free, self.asserts, self.n_sites, self.at = free, asserts, n_sites, at

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        j = len(self.asserts) if self.at is None else self.at
        sites: list[list] = []
        test = _Sites(self.free, sites, self.n_sites).visit(node.test)
        expected = None
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
                and _plain_literal(test.comparators[0])):
            expected = test.comparators[0]
            test.left = _call("__execrl_got__", test.left, _number(j, test.left), test.left)
        if self.at is None:
            self.asserts.append(_AssertInfo(expected, sites))
        else:  # the number reserved for this assert when its test was prepared
            self.asserts[j] = _AssertInfo(expected, sites)
        msg = _call("__execrl_fail__", node, _number(j, node), *([node.msg] if node.msg is not None else []))
        return [ast.copy_location(ast.Expr(_call("__execrl_enter__", node, _number(j, node))), node),
                ast.copy_location(ast.Assert(test=test, msg=msg), node)]


class _Sites(ast.NodeTransformer):
    """Notes the value of each outermost call of a program's name inside an assert."""

    def __init__(self, free: set[str], sites: list, n_sites: list[int]) -> None:
        self.free, self.sites, self.n_sites = free, sites, n_sites

    def visit_Call(self, node: ast.Call) -> ast.AST:
        root = node.func
        while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
            root = root.value if not isinstance(root, ast.Call) else root.func
        if isinstance(root, ast.Name) and root.id in self.free:
            k = self.n_sites[0]
            self.n_sites[0] += 1
            self.sites.append([k, node])
            return _call("__execrl_site__", node, _number(k, node), node)
        return self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node  # evaluated later, elsewhere: not this assert's value

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda


class _Test:
    __slots__ = ("source", "code", "names", "error", "plain")

    def __init__(self, source: str, code: Any, names: frozenset[str], error: tuple | None = None) -> None:
        self.source, self.code, self.names, self.error = source, code, names, error
        self.plain: _PlainCall | None = None


class _PlainCall:
    """A test ``assert name(literal, ...) == literal`` (no setup code), prepared without
    compiling it: its call as the message the test would send (``text``, or ``None`` when
    its arguments hold containers, which ``make_args`` then builds afresh for every
    candidate with the test's own expressions), the expected value, the number of its
    assert, and its tree, compiled only when a candidate's name is not a function of the
    program (then the test runs as written)."""

    __slots__ = ("name", "text", "make_args", "expected", "j", "tree")

    def __init__(self, name: str, text: str, make_args: Any, expected: Any, j: int, tree: ast.Module) -> None:
        self.name, self.text, self.make_args, self.expected, self.j, self.tree = \
            name, text, make_args, expected, j, tree


_LITERAL_SCALARS = (int, float, complex, str, bytes, bool, type(None))
BATCH_MAX_CALLS = 256
BATCH_MAX_BYTES = 1 << 16


def _literal(node: ast.AST) -> bool:
    """A literal that names nothing (its value is the same at every run of the test)."""
    if isinstance(node, ast.Constant):
        return type(node.value) in _LITERAL_SCALARS
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float, complex)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _literal(k) for k in node.keys) and all(_literal(v) for v in node.values)
    return False


def _plain_call_assert(tree: ast.Module) -> tuple[str, ast.expr] | None:
    """``assert name(literal, ...) == literal``: the called name and the expected literal."""
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return None
    node = tree.body[0]
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.left, ast.Call) and isinstance(test.left.func, ast.Name)
            and not test.left.keywords and all(_literal(a) for a in test.left.args)
            and _literal(test.comparators[0])):
        return None
    if node.msg is not None and not (isinstance(node.msg, ast.Constant) and type(node.msg.value) is str):
        return None
    name = test.left.func.id
    if name in _JUDGE_MODULES or name.startswith("__"):
        return None
    return name, test.comparators[0]


def _content(v: Any) -> Any:
    """What a literal tells the program, whatever its container types: a tuple's items are
    those of the list ``[1, 2]`` (the program can rebuild one from the other); equal
    contents compare equal (``1 == 1.0`` as in ``==``)."""
    return _contents(v, [])


def _contents(v: Any, out: list) -> Any:
    """``_content(v)``; appends to ``out`` the content of ``v`` and of every value inside it
    (the items of its lists, tuples, sets and dicts; a frozenset's items are not listed), in
    one walk."""
    t = type(v)
    if t is int or t is str or t is float or t is bool or v is None:  # most items: themselves
        out.append(v)
        return v
    if isinstance(v, (list, tuple)):
        c = ("seq", tuple([_contents(x, out) for x in v]))
    elif isinstance(v, set):
        c = ("set", frozenset([_contents(x, out) for x in v]))
    elif isinstance(v, frozenset):
        c = ("set", frozenset([_contents(x, []) for x in v]))
    elif isinstance(v, dict):
        c = ("map", frozenset([(_contents(a, out), _contents(b, out)) for a, b in v.items()]))
    elif isinstance(v, (bytes, bytearray)):
        c = ("bytes", bytes(v))
    else:
        c = v
    out.append(c)
    return c


def _number_forms(x: float | int) -> set[str]:
    """A number's text forms, and those of the ints it rounds to: ``3`` → {"3", "3.0"}; ``2.5`` →
    {"2.5", "2", "3"}."""
    forms = {str(x), repr(x)}
    try:
        f = float(x)
    except (OverflowError, ValueError):
        return forms
    if f == f and f not in (float("inf"), float("-inf")):
        forms.add(repr(f))
        # the ints a program's `int`, `round`, `math.floor` or `math.ceil` makes of it (42.9: 42, 43)
        forms.update(str(n) for n in {math.floor(f), math.ceil(f)})
    return forms


def _forms(c: Any) -> set[str]:
    """The text forms of a content (``_content``) that a program could turn it into with a plain
    type conversion: a string and its bytes (latin-1 or UTF-8), a number and its digits, a
    sequence of strings and their concatenation, a sequence or set and its items in any order
    (sorted), a dict and its pairs. Two contents with a form in common may carry each other."""
    t = type(c)
    if c is None:
        return {"None"}
    if t is bool:
        return {str(c)} | _number_forms(int(c))
    if t is int or t is float:
        return _number_forms(c)
    if t is str:
        forms = {c}
        try:
            forms |= _number_forms(float(c)) if len(c) < 64 else set()
        except ValueError:
            pass
        return forms
    if t is tuple and len(c) == 2 and c[0] == "bytes":
        forms = {c[1].decode("latin-1")} | _forms(("seq", tuple(c[1])))  # `list(b"ij") == [105, 106]`
        try:
            forms.add(c[1].decode("utf-8"))
        except UnicodeDecodeError:
            pass
        return forms
    if t is tuple and len(c) == 2 and c[0] in ("seq", "set", "map"):
        items = list(c[1])
        if c[0] == "map":  # its pairs, as `list(d.items())` gives them
            reps = sorted(min(_forms(("seq", pair))) for pair in items)
        else:
            reps = sorted(min(_forms(x)) for x in items)
        forms = {"\x1d" + "\x1f".join(reps) + "\x1d"}
        texts = [x for x in items if type(x) is str]
        if items and len(texts) == len(items):
            forms.add("".join(sorted(texts)))
            if c[0] == "seq":
                forms.add("".join(texts))
        return forms
    return {repr(c)}


class Problem:
    """A problem as the judge runs it."""

    def __init__(self, spec: dict) -> None:
        self.mode = spec["mode"]
        self.asserts: list[_AssertInfo] = []
        self.setup: _Test | None = None
        self.tests: list[_Test] = []
        self.imported: set[str] = set()
        self.batch_calls: list[str] = []
        self.batch_frame = b""
        self.batch_complete = False
        self.n_sites = [0]
        self.setup_classes: list[str] = []
        if self.mode == "call":
            self.entry_point = spec["entry_point"]
            self.calls = [(t["args"], t["expected"]) for t in spec["tests"]]
            return
        setup_src = spec.get("setup") or ""
        trees = []
        try:
            setup_tree = ast.parse(setup_src) if setup_src.strip() else None
        except (SyntaxError, ValueError) as e:
            setup_tree = None
            self.setup = _Test(setup_src, None, frozenset(), ("SyntaxError", f"invalid setup code: {e}", ""))
        for src in spec["tests"]:
            try:
                trees.append(ast.parse(src))
            except (SyntaxError, ValueError) as e:
                trees.append(e)
        shapes = [None if isinstance(t, Exception) or setup_src.strip() else _plain_call_assert(t) for t in trees]
        values = _literal_values([None if shape is None else tree.body[0].test for shape, tree in zip(shapes, trees)])
        stored: set[str] = set()
        setup_loaded: set[str] = set()
        n_sites = self.n_sites
        if setup_tree is not None:
            # the classes the setup defines (``ListNode``): the program's names too, as in one
            # interpreter (``_SetupClass``); nothing else of the setup's reaches the run
            self.setup_classes = [n.name for n in setup_tree.body if isinstance(n, ast.ClassDef)]
            setup_loaded, stored, imported = _names(setup_tree)
            setup_loaded -= stored
            self.imported |= imported
            free = setup_loaded - _BUILTIN_NAMES
            tree = _Instrument(free, self.asserts, n_sites).visit(setup_tree)
            self.setup = _Test(setup_src, compile(tree, "<setup>", "exec", dont_inherit=True),
                               frozenset(setup_loaded))
        plain_args: list[tuple] = []
        side = _JudgeSide(-1)
        for src, tree, shape, value in zip(spec["tests"], trees, shapes, values):
            if isinstance(tree, Exception):
                self.tests.append(_Test(src, None, frozenset(),
                                        ("SyntaxError", f"invalid test: {tree}", f"SyntaxError: invalid test: {tree}")))
                continue
            if value is not None:
                plain = self._plain(src, tree, shape[0], value, side)
                if plain is not None:
                    plain_args.append(value[1])
                    continue
            loaded, own, imported = _names(tree)
            self.imported |= imported
            names = (loaded - own - stored) | setup_loaded
            free = names - _BUILTIN_NAMES
            tree = _Instrument(free, self.asserts, n_sites).visit(tree)
            self.tests.append(_Test(src, compile(tree, "<test>", "exec", dont_inherit=True), frozenset(names)))
        self._plan_batch(plain_args)

    def _plain(self, src: str, tree: ast.Module, name: str, value: tuple, side: _JudgeSide) -> _PlainCall | None:
        """A plain call test, prepared without compiling it (see ``_PlainCall``)."""
        make_args, args, expected = value
        ex = _Exchange()
        try:
            text = _dumps(["c", {"g": name}, [side.enc(a, ex) for a in args], []])
        except Exception:  # noqa: BLE001 - not a value this path can hold: the test runs as written
            return None
        test = tree.body[0].test
        j = len(self.asserts)
        k = self.n_sites[0]
        self.n_sites[0] += 1
        self.asserts.append(_AssertInfo(test.comparators[0], [[k, test.left]]))
        entry = _Test(src, None, frozenset((name,)))
        entry.plain = _PlainCall(name, text, make_args if ex.table else None, expected, j, tree)
        self.tests.append(entry)
        return entry.plain

    def test_code(self, test: _Test) -> Any:
        """The compiled test; a plain call test is compiled when first needed (its assert
        keeps the number reserved for it)."""
        if test.code is None:
            plain = test.plain
            free = {plain.name} - _BUILTIN_NAMES
            tree = _Instrument(free, self.asserts, self.n_sites, at=plain.j).visit(plain.tree)
            test.code = compile(tree, "<test>", "exec", dont_inherit=True)
        return test.code

    def _plan_batch(self, plain_args: list[tuple]) -> None:
        """The calls of the tests that come first, when they are plain calls of one name with
        literal arguments (``assert f(3, [1, 2]) == 7``): the judge sends them with the
        program (see ``_ChildSide.serve_batch``), so that the run answers them without a
        round trip each. They are the very messages the tests will send. A test's arguments
        reach the run before the earlier tests' calls are answered, so the batch stops
        before a test whose arguments hold a value that is, or converts to, an earlier test's
        expected value (equal content, or a text form in common, ``_forms``: ``b'hELLO'``
        for ``'hELLO'``, ``'cba'`` for ``['c', 'b', 'a']``, ``'42'`` for ``42``, ``(2, 1)`` for
        ``[1, 2]``): that value never reaches the run before its call has returned, as
        without the batch."""
        name, calls, size = None, [], 0
        expected: list = []
        expected_forms: set = set()
        for test, args in zip(self.tests, plain_args):
            plain = test.plain
            if plain is None or (name is not None and plain.name != name) or len(calls) >= BATCH_MAX_CALLS:
                break
            try:
                if expected:
                    inside: list = []
                    for a in args:
                        _contents(a, inside)
                    if any(c in expected for c in inside):
                        break
                    if any(not expected_forms.isdisjoint(_forms(c)) for c in inside):
                        break
                nested: list = []
                content = _contents(plain.expected, nested)
                # the expected value and every container inside it (`[3, 4]` in `[[1, 2], [3, 4]]`)
                parts = [content] + [c for c in nested[:-1] if type(c) is tuple]
                forms = set().union(*(_forms(c) for c in parts))
            except Exception:  # noqa: BLE001 - not a literal this check can hold
                break
            size += len(plain.text)
            if size > BATCH_MAX_BYTES:
                break
            name = plain.name
            calls.append(plain.text)
            expected.extend(parts)
            expected_forms |= forms
        self.batch_complete = bool(calls) and len(calls) == len(self.tests)
        if calls:
            self.batch_calls = calls
            # ``_dumps(["b", name, [each call's message], complete])``, with each message's text as it is
            data = f'["b",{_dumps(name)},[{",".join(calls)}],{"true" if len(calls) == len(self.tests) else "false"}]'
            data = data.encode("ascii")
            self.batch_frame = _STRUCT_LEN.pack(len(data) + 1) + b"J" + data


_NO_ARGUMENTS = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                              defaults=[])


def _scalar(node: ast.expr) -> bool:
    """A literal number, string, bytes, bool or None (possibly signed): a value without
    identity or construction order of its own to keep."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant)


def _literal_values(tests: list[ast.Compare | None]) -> list[tuple | None]:
    """For each ``name(literal, ...) == literal`` (``None`` for other tests): a function
    that builds the arguments with the test's own expressions (``lambda: (a, b)``: the same
    bytecode, so the same objects, down to a set's table), the arguments it built, and the
    expected value; one compile for the whole problem. Arguments that are all scalars need
    no function (nothing of theirs can be changed or named by an answer): they and the
    expected value are read from the tree, without compiling. ``None`` for a test whose
    literals cannot be built (it then runs as written, and raises there)."""
    nodes: list = []
    read: dict[int, tuple] = {}
    for i, t in enumerate(tests):
        if t is None:
            nodes.append(None)
            continue
        if all(_scalar(a) for a in t.left.args):
            try:
                read[i] = (None, tuple(ast.literal_eval(a) for a in t.left.args), ast.literal_eval(t.comparators[0]))
                nodes.append(None)
                continue
            except Exception:  # noqa: BLE001 - e.g. an unhashable set item: built as the test builds it
                pass
        where = _where(t)
        make = ast.Lambda(_NO_ARGUMENTS, ast.Tuple(list(t.left.args), ast.Load(), **where), **where)
        nodes.append(ast.Tuple([make, t.comparators[0]], ast.Load(), **where))
    present = [n for n in nodes if n is not None]
    if not present:
        return [read.get(i) for i in range(len(tests))]

    def evaluate(elts: list[ast.expr]) -> list:
        code = compile(ast.Expression(ast.List(elts, ast.Load(), **_where(elts[0]))), "<tests>", "eval",
                       dont_inherit=True)
        return [(make, make(), expected) for make, expected in eval(code, {"__builtins__": {}})]

    try:
        values = iter(evaluate(present))
        return [read.get(i) if n is None else next(values) for i, n in enumerate(nodes)]
    except Exception:  # noqa: BLE001 - one of them cannot be built: each on its own
        out = []
        for i, n in enumerate(nodes):
            try:
                out.append(read.get(i) if n is None else evaluate([n])[0])
            except Exception:  # noqa: BLE001
                out.append(None)
        return out
