"""Split a problem into what the sandbox runs and what the judge keeps.

Expected values never leave the executor's process. For an ``assert`` test such as
``assert math.isclose(area(2), 12.56, rel_tol=1e-3)`` the sub-expressions that depend on the
candidate (``area(2)``: a *probe*) are sent to the sandbox; the child returns each probe's
value as a strictly-typed plain value (``codec``); the judge evaluates the rest of the
assert (``math.isclose(<value>, 12.56, rel_tol=1e-3)``) itself, with its own builtins and
its own ``math``/``cmath``.

Which names belong to the candidate is decided from syntax trees, never from text:

* the test's names that are neither safe builtins, ``math``/``cmath``, names the setup code
  defines on the judge's side, nor names the test binds itself;
* a safe builtin the program redefines (MBPP task 126 defines ``sum``) is the candidate's
  only in a test that calls no other candidate name: there it is the function under test.
  Anywhere else the judge's own builtin is used, so a program's ``sorted`` never decides what
  is expected. ``math`` and ``cmath`` are always the modules they are.

The setup code is split statement by statement: what does not touch the candidate (helper
functions, data, imports) runs in the judge; what does (``root = Node(1)``) runs in
the child, along with only those judge-side statements it or the probes need as input.

Tests that cannot be split into probes (several statements, a comparison inside a
comprehension or a lambda, ...) are *replayed*: the child runs the test with every
candidate-dependent expression wrapped so that its value is recorded (asserts reduced to the
expressions they evaluate, without the comparisons); the judge then runs the test itself,
each wrapped expression returning the recorded value. The child reports values, never a
verdict, so nothing a program does in its own process (replacing ``exec``, rewriting the
result fd, hooking ``__eq__``) can make a replayed test pass.
"""

from __future__ import annotations

import ast
import builtins
import copy
import hashlib
import json
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from execrl.problems import Problem
from execrl.sandbox.guard import GuardOps, judge_namespace, run_with_deadline, scan_judge_tree

SAFE_BUILTIN_NAMES = (
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "chr", "complex", "dict",
    "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "int",
    "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "oct", "ord",
    "pow", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple",
    "type", "zip", "True", "False", "None", "Exception", "ValueError", "TypeError",
)
SAFE_MODULE_NAMES = frozenset({"math", "cmath"})
SAFE_NAMES = frozenset(SAFE_BUILTIN_NAMES) | SAFE_MODULE_NAMES
JUDGE_BUILTINS = {name: getattr(builtins, name) for name in SAFE_BUILTIN_NAMES if hasattr(builtins, name)}
# the judge re-raises candidate exceptions as their nearest builtin class, so replayed tests
# can catch them; anything that would stop the judge itself becomes a plain Exception
JUDGE_BUILTINS.update({name: getattr(builtins, name) for name in dir(builtins)
                       if isinstance(getattr(builtins, name), type)
                       and issubclass(getattr(builtins, name), Exception)})
JUDGE_BUILTINS["AssertionError"] = AssertionError
JUDGE_BUILTINS["__import__"] = builtins.__import__  # imports in setup code and replayed tests are the judge's

_STRUCTURAL = (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.IfExp, ast.Tuple, ast.List,
               ast.Set, ast.Dict, ast.Subscript, ast.Slice, ast.JoinedStr, ast.FormattedValue,
               ast.Starred)
_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp)

# CPython 3.11's AST <-> object conversion keeps its recursion depth in interpreter-wide state,
# so ast.parse / compile(ast) in two threads at once can fail with "AST constructor recursion
# depth mismatch" (python/cpython#106905). Preparation and parsing are serialized.
AST_LOCK = threading.RLock()


class _NotSplittable(Exception):
    pass


@dataclass
class JudgeTest:
    source: str
    kind: str  # "p": probes judged here; "r": replayed here from recorded values
    judge_code: Any = None
    probes: list[str] = field(default_factory=list)
    expected_node: Any = None
    timed: bool = False
    """Evaluating it runs Python frames (comprehensions, helpers): under the time limit."""
    sites: list[str] = field(default_factory=list)
    """Replayed tests: the source of each recorded expression, for messages."""
    _expected_repr: str | None = field(default=None, repr=False)

    @property
    def expected_repr(self) -> str | None:
        """The expected side of ``assert probe == expected``, for messages. Made on first
        use: unparsing a large literal costs more than judging, and most tests pass."""
        if self._expected_repr is None and self.expected_node is not None:
            text = ast.unparse(self.expected_node)
            self._expected_repr = text if len(text) <= 300 else text[:297] + "..."
        return self._expected_repr


@dataclass
class Prepared:
    key: str
    test_type: str
    child_spec: dict[str, Any]
    tests: list[Any]
    entry_point: str | None = None
    judge_names: frozenset[str] = frozenset()
    """Safe builtins used by tests that call no other candidate name: a program that
    redefines one of them gets a variant where that test evaluates it in the sandbox."""
    env: dict[str, Any] = field(default_factory=dict)
    """The judge's namespace for this problem's tests (builtins, math, judge-side setup)."""

    @property
    def n_tests(self) -> int:
        return len(self.tests)


def problem_key(problem: Problem) -> str:
    payload = json.dumps([problem.test_type, problem.tests, problem.setup_code, problem.entry_point],
                         sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def prepare(problem: Problem, shadowed: frozenset[str] = frozenset()) -> Prepared:
    with AST_LOCK:
        return _prepare(problem, shadowed)


def _prepare(problem: Problem, shadowed: frozenset[str]) -> Prepared:
    key = problem_key(problem)
    if problem.test_type == "assert":
        setup = _split_setup(problem.setup_code or "")
        tests, child_tests, needed, judge_names = [], [], set(), set()
        for src in problem.tests:
            judge_test, child_test, names, shadowable = _prepare_assert(src, setup, shadowed)
            tests.append(judge_test)
            child_tests.append(child_test)
            needed |= names
            judge_names |= shadowable
        # replayed setup functions travel inside the tests that use them
        spec = {"mode": "assert", "tests": child_tests, "setup": setup.child_source(needed - setup.replayed.keys())}
        if shadowed:
            key += "|" + ",".join(sorted(shadowed))
        return Prepared(key, "assert", spec, tests, judge_names=frozenset(judge_names), env=setup.env)
    if problem.test_type == "call":
        args = [json.dumps(t["args"]) for t in problem.tests]
        spec = {"mode": "call", "entry_point": problem.entry_point, "args": args}
        return Prepared(key, "call", spec, [t["expected"] for t in problem.tests], problem.entry_point)
    if problem.test_type == "stdio":
        spec = {"mode": "stdio", "inputs": [t["input"] for t in problem.tests]}
        return Prepared(key, "stdio", spec, [(t["input"], t["output"]) for t in problem.tests])
    raise ValueError(f"unknown test_type {problem.test_type!r}")


# --------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------

def _stored_names(tree: ast.AST) -> set[str]:
    """Names a piece of test code binds itself (assignments, loop and comprehension
    targets, parameters, definitions, imports, exception names)."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
    return out


def _loaded_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _test_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names loaded, names the test binds itself) in one walk (the common case: one
    assert, no bindings)."""
    loaded, binds = set(), False
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            if isinstance(n.ctx, ast.Load):
                loaded.add(n.id)
            else:
                binds = True
        elif isinstance(n, (ast.stmt, ast.Lambda, ast.comprehension, ast.NamedExpr)) and not isinstance(
                n, (ast.Assert, ast.Expr)):
            binds = True
    return loaded, (_stored_names(tree) if binds else set())


def _module_bindings(body: list[ast.stmt]) -> set[str]:
    """Names bound at module level by these statements (function and class bodies bind
    locally, except for names they declare ``global``)."""
    out: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            out.update(name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            out.add(node.rest)
        elif isinstance(node, ast.Import):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name == "*":
                    module = sys.modules.get(node.module or "") if node.module in SAFE_MODULE_NAMES else None
                    out.update(dir(module) if module is not None else SAFE_BUILTIN_NAMES)
                else:
                    out.add(a.asname or a.name)
        stack.extend(ast.iter_child_nodes(node))
    return out


def candidate_bindings(code: str, names: frozenset[str]) -> frozenset[str]:
    """Which of ``names`` (safe builtins) the program binds at module level, from its syntax
    tree. ``math``/``cmath`` are never counted: the judge always uses the real modules."""
    names = names - SAFE_MODULE_NAMES
    if not any(name in code for name in names):  # linear pre-check: most programs need no parse
        return frozenset()
    with AST_LOCK:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return frozenset()  # it will not run anyway
        return frozenset(_module_bindings(tree.body) & names)


# --------------------------------------------------------------------------------------
# Setup code
# --------------------------------------------------------------------------------------

@dataclass
class _Statement:
    node: ast.stmt | None
    source: str
    judge_side: bool
    bound: set[str]
    loaded: set[str]


@dataclass
class _Setup:
    env: dict[str, Any]
    judge_names: frozenset[str]
    helpers: frozenset[str]
    statements: list[_Statement]
    replayed: dict[str, ast.stmt] = field(default_factory=dict)
    """Setup functions that call the program (``def check(x): return f(x) == 2``): a test
    using one is replayed with the function as part of the test, so that its comparisons
    run in the judge."""

    def child_source(self, needed: set[str]) -> str | None:
        """The setup the child runs: every candidate-dependent statement (a function that
        tests replay only if another statement needs it), and the judge-side statements
        that they or the probes need (walked backwards)."""
        keep: list[str] = []
        needed = set(needed)
        for st in reversed(self.statements):
            replayed_only = st.bound and st.bound <= self.replayed.keys()
            if (not st.judge_side and not replayed_only) or st.bound & needed:
                keep.append(st.source)
                needed |= st.loaded
        return "\n".join(reversed(keep)) or None

    def functions_for(self, names: set[str]) -> list[ast.stmt]:
        """The replayed setup functions ``names`` reach (in setup order)."""
        reach, todo = set(), [n for n in names if n in self.replayed]
        while todo:
            name = todo.pop()
            if name not in reach:
                reach.add(name)
                todo += [n for n in _loaded_names(self.replayed[name]) if n in self.replayed]
        return [copy.deepcopy(node) for name, node in self.replayed.items() if name in reach]


_NO_SETUP_ENV = judge_namespace(JUDGE_BUILTINS)
"""Shared by problems without setup code (evaluation copies it; nothing writes to it)."""


def _split_setup(src: str) -> _Setup:
    if not src.strip():
        return _Setup(_NO_SETUP_ENV, frozenset(), frozenset(), [])
    env = judge_namespace(JUDGE_BUILTINS)
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):  # a broken dataset row: the child reports the error
        return _Setup(env, frozenset(), frozenset(), [_Statement(None, src, False, set(), set())])
    judge_defined: set[str] = set()
    helpers: set[str] = set()
    replayed: dict[str, ast.stmt] = {}
    statements = []
    for node in tree.body:
        bound = _module_bindings([node])
        loaded = _loaded_names(node) - (_stored_names(node) - bound)
        # imports too: a module the setup imports is the judge's (the program cannot patch
        # the copy a test's comparison uses); one the judge cannot import is left to the child
        judge_side = isinstance(node, (ast.Import, ast.ImportFrom)) or (
            not isinstance(node, (ast.Global, ast.Nonlocal)) and loaded <= (SAFE_NAMES | judge_defined))
        if judge_side:
            module = GuardOps().visit(ast.Module(body=[copy.deepcopy(node)], type_ignores=[]))
            ast.fix_missing_locations(module)
            try:
                run_with_deadline(exec, compile(module, "<setup>", "exec", dont_inherit=True), env)
            except Exception:  # noqa: BLE001 - let the child run (and report) it instead
                judge_side = False
        if judge_side:
            judge_defined |= bound
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) or any(
                    isinstance(n, ast.Lambda) for n in ast.walk(node)):
                helpers |= bound
        elif isinstance(node, ast.FunctionDef):
            replayed[node.name] = node
        statements.append(_Statement(node, ast.unparse(node), judge_side, bound, loaded))
    return _Setup(env, frozenset(judge_defined), frozenset(helpers), statements, replayed)


# --------------------------------------------------------------------------------------
# Assert tests
# --------------------------------------------------------------------------------------

def _prepare_assert(src: str, setup: _Setup, shadowed: frozenset[str]
                    ) -> tuple[JudgeTest, dict, set[str], set[str]]:
    """(judge test, child test, names the child needs from the setup, shadowable names)."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        # the child compiles it and reports the error; the judge has nothing to run
        return JudgeTest(src, "r"), {"kind": "r", "source": src}, set(), set()
    known = SAFE_NAMES | setup.judge_names
    loaded, local = _test_names(tree)
    candidate = loaded - known - local
    # a redefined safe builtin is the candidate's only where it is the function under test
    shadowable = set() if candidate else (loaded & set(SAFE_BUILTIN_NAMES)) - local
    safe = known if candidate else known - shadowed
    functions = setup.functions_for(loaded)
    if functions:  # the setup's functions that call the program run in the judge, replayed
        tree.body[:0] = functions
        src_for_replay = ast.unparse(tree)
        judge_test, child_src = _prepare_replay(src_for_replay, tree, safe - {f.name for f in functions})
        judge_test.source = src
        return judge_test, {"kind": "r", "source": child_src}, _loaded_names(ast.parse(child_src)), shadowable
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert):
        try:
            judge_test, child, needed = _split_assert(src, tree.body[0].test, safe, setup.helpers)
            return judge_test, child, needed, shadowable
        except _NotSplittable:
            pass
    judge_test, child_src = _prepare_replay(src, tree, safe)
    return judge_test, {"kind": "r", "source": child_src}, _loaded_names(ast.parse(child_src)), shadowable


def _unsafe_ids(root: ast.AST, safe: frozenset[str]) -> set[int]:
    """ids of the nodes of ``root`` whose subtree uses a name outside ``safe``: one pass,
    instead of walking each subtree again at every level of the split."""
    parent: dict[int, ast.AST] = {}
    names = []
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            if node.id not in safe:
                names.append(node)
            continue
        for child in ast.iter_child_nodes(node):
            parent[id(child)] = node
            stack.append(child)
    unsafe: set[int] = set()
    for node in names:
        while node is not None and id(node) not in unsafe:
            unsafe.add(id(node))
            node = parent.get(id(node))
    return unsafe


class _Splitter:
    def __init__(self, safe: frozenset[str], root: ast.AST) -> None:
        self.safe = safe
        self.probes: list[tuple[str, bool]] = []
        self.names: set[str] = set()  # loaded by the probes: what the child needs defined
        self._unsafe = _unsafe_ids(root, safe)  # of the original tree (visit asks before rewriting)

    def unsafe(self, node: ast.AST) -> bool:
        return id(node) in self._unsafe

    def probe(self, node: ast.AST, materialize: bool) -> ast.Name:
        for n in ast.walk(node):
            if isinstance(n, ast.Compare):
                raise _NotSplittable  # a comparison would run (and be rigged) in the child
            if isinstance(n, ast.Name):
                self.names.add(n.id)
        self.probes.append((ast.unparse(node), materialize))
        return ast.copy_location(ast.Name(id=f"_v{len(self.probes) - 1}", ctx=ast.Load()), node)

    def visit(self, node: ast.AST, in_safe_call: bool = False) -> ast.AST:
        unsafe = self.unsafe
        if not unsafe(node):
            return node
        if isinstance(node, ast.Call) and not unsafe(node.func):
            bare = [a for a in node.args
                    if isinstance(a, (ast.Name, ast.Attribute, ast.Lambda)) and unsafe(a)]
            if bare:  # map(f, xs), sorted(xs, key=f): the function itself can't be shipped
                return self.probe(node, materialize=in_safe_call)
            node.args = [self.visit(a, True) for a in node.args]
            for kw in node.keywords:
                if isinstance(kw.value, (ast.Name, ast.Attribute, ast.Lambda)) and unsafe(kw.value):
                    return self.probe(node, materialize=in_safe_call)
                kw.value = self.visit(kw.value, True)
            return node
        if isinstance(node, (ast.BoolOp, ast.IfExp)) and any(
                unsafe(v) for v in (node.values[1:] if isinstance(node, ast.BoolOp) else (node.body, node.orelse))):
            # Python may never evaluate these operands, the child would evaluate every probe:
            # replayed instead, where the judge takes only the values it uses
            raise _NotSplittable
        if isinstance(node, _STRUCTURAL):
            for name, value in ast.iter_fields(node):
                if isinstance(value, ast.AST):
                    setattr(node, name, self.visit(value))
                elif isinstance(value, list):
                    setattr(node, name, [self.visit(v) if isinstance(v, ast.AST) else v for v in value])
            return node
        if isinstance(node, _SCOPES) and not in_safe_call:
            raise _NotSplittable
        return self.probe(node, materialize=in_safe_call)


def _split_assert(src: str, test: ast.expr, safe: frozenset[str], helpers: frozenset[str]
                  ) -> tuple[JudgeTest, dict, set[str]]:
    splitter = _Splitter(safe, test)
    body = splitter.visit(test)
    expected_node = None
    if (isinstance(body, ast.Compare) and len(body.ops) == 1 and isinstance(body.ops[0], ast.Eq)
            and isinstance(body.left, ast.Name) and body.left.id.startswith("_v")
            and not any(isinstance(n, ast.Name) and n.id.startswith("_v") for n in ast.walk(body.comparators[0]))):
        expected_node = body.comparators[0]
    expression = ast.Expression(body=body)
    guards, timed = scan_judge_tree(body, helpers)
    if guards:  # rewritten on a copy: ``body`` still shows the test in messages
        expression = GuardOps().visit(copy.deepcopy(expression))
        ast.fix_missing_locations(expression)
    try:  # the only new nodes (the probes' names) carry their locations already
        code = compile(expression, "<judge>", "eval", dont_inherit=True)
    except (TypeError, ValueError):
        ast.fix_missing_locations(expression)
        code = compile(expression, "<judge>", "eval", dont_inherit=True)
    probes = [p for p, _ in splitter.probes]
    judge = JudgeTest(src, "p", code, probes, expected_node, timed=timed)
    return judge, {"kind": "p", "probes": probes, "materialize": [m for _, m in splitter.probes]}, splitter.names


# --------------------------------------------------------------------------------------
# Replayed tests
# --------------------------------------------------------------------------------------

def _local_functions(tree: ast.AST) -> dict[str, list[ast.AST]]:
    """Functions the test defines itself (``def``, or a name assigned a lambda): their code
    is the test's, run by the judge, never recorded as a value."""
    out: dict[str, list[ast.AST]] = {}
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(n.name, []).extend(n.body)
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Lambda):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(n.value)
    return out


def _bindings(tree: ast.AST):
    """(names bound, value expressions they are bound from) for taint propagation."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            if isinstance(n.value, ast.Lambda):
                continue  # a local function (see _local_functions)
            yield {x.id for t in n.targets for x in ast.walk(t) if isinstance(x, ast.Name)}, [n.value]
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and n.value is not None:
            yield {x.id for x in ast.walk(n.target) if isinstance(x, ast.Name)}, [n.value, n.target]
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
            yield {x.id for x in ast.walk(n.target) if isinstance(x, ast.Name)}, [n.iter]
        elif isinstance(n, ast.NamedExpr):
            yield {n.target.id}, [n.value]
        elif isinstance(n, (ast.With, ast.AsyncWith)):
            for item in n.items:
                if item.optional_vars is not None:
                    yield {x.id for x in ast.walk(item.optional_vars) if isinstance(x, ast.Name)}, [item.context_expr]


def _dependent_names(tree: ast.AST, safe: frozenset[str]) -> tuple[set[str], set[str], set[str]]:
    """(candidate names, test-local names whose value comes from the candidate, test-local
    functions that reach the candidate)."""
    candidate = _loaded_names(tree) - safe - _stored_names(tree)
    tainted: set[str] = set()
    local = _local_functions(tree)
    reaching: set[str] = set()
    bindings = list(_bindings(tree))
    changed = True
    while changed:
        changed = False
        dep = candidate | tainted
        for targets, values in bindings:
            if targets - tainted and any(_loaded_names(v) & dep for v in values):
                tainted |= targets
                changed = True
        for name, body in local.items():
            if name not in reaching and any(_loaded_names(b) & (dep | reaching) for b in body):
                reaching.add(name)
                changed = True
    return candidate, tainted - set(local), reaching


class _Sites:
    """Finds the recorded expressions of a replayed test: maximal candidate-dependent
    expressions that contain no comparison (whose result the judge must compute)."""

    def __init__(self, dep: set[str], tainted: set[str], local: set[str]) -> None:
        self.dep, self.tainted, self.local = dep, tainted, local
        self.sources: list[str] = []
        self.ids: dict[int, int] = {}

    def depends(self, node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in self.dep for n in ast.walk(node))

    def reaches(self, node: ast.AST) -> bool:
        """Whether evaluating ``node`` calls a test-local function that reaches the candidate."""
        return any(isinstance(n, ast.Name) and n.id in self.local for n in ast.walk(node))

    def find(self, node: ast.AST) -> None:
        if isinstance(node, ast.expr) and not isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
            if not self.depends(node) or (isinstance(node, ast.Name) and node.id in self.tainted):
                return  # the judge computes it (a tainted local already holds a recorded value)
            if self._site(node):
                self.ids[id(node)] = len(self.sources)
                self.sources.append(ast.unparse(node))
                return
        for child in ast.iter_child_nodes(node):
            self.find(child)

    def _site(self, node: ast.expr) -> bool:
        """Record ``node`` as a whole, or look for smaller expressions inside it? As small
        as the probes of a split assert: the judge's functions and operators stay with the
        judge (so neither setup helpers nor expected values reach the child)."""
        if any(isinstance(n, (ast.Compare, ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await))
               for n in ast.walk(node)):
            return False  # its comparisons are the judge's: look inside
        if isinstance(node, ast.Call) and not self.depends(node.func):
            values = [*node.args, *(kw.value for kw in node.keywords)]
            return any(isinstance(a, (ast.Name, ast.Attribute, ast.Lambda)) and self.depends(a) for a in values)
        return not isinstance(node, (*_STRUCTURAL, *_SCOPES))


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


def _thunk(expr: ast.expr) -> ast.Lambda:
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                      body=expr)


class _ChildVersion(ast.NodeTransformer):
    """The child's version: recorded expressions wrapped, asserts reduced to evaluating
    their recorded expressions (no comparison, no expected value)."""

    def __init__(self, sites: _Sites, assert_only: set[str] = frozenset()) -> None:
        self.sites = sites
        self.quiet = False
        self.asserts = 0
        self.assert_only = assert_only
        self.reducing_returns = False

    def visit(self, node: ast.AST) -> ast.AST:
        k = self.sites.ids.get(id(node))
        if k is not None:  # maximal: nothing inside it is recorded separately
            return _call("__execrl_quiet__" if self.quiet else "__execrl_site__", ast.Constant(k), _thunk(node))
        return super().visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        # a function only asserts use: what it returns is only asserted, so it returns its
        # recorded values, not its comparisons (and their expected values)
        outer = self.reducing_returns
        self.reducing_returns = node.name in self.assert_only
        try:
            return self.generic_visit(node)
        finally:
            self.reducing_returns = outer

    def visit_Return(self, node: ast.Return) -> ast.AST:
        if not self.reducing_returns or node.value is None:
            return self.generic_visit(node)
        self.quiet, outer = True, self.quiet
        try:
            node.value = self.reduce(node.value)
        finally:
            self.quiet = outer
        return node

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        j = self.asserts
        self.asserts += 1
        self.quiet = True
        try:
            reduced = self.reduce(node.test)
        finally:
            self.quiet = False
        return ast.copy_location(ast.Expr(_call("__execrl_assert__", ast.Constant(j), _thunk(reduced))), node)

    def reduce(self, node: ast.expr) -> ast.expr:
        if id(node) in self.sites.ids:
            return self.visit(node)
        if not self.sites.depends(node):
            # nothing recorded here, unless it calls the test's own functions that reach the
            # candidate: those run as they are (their recorded expressions are wrapped)
            return self.visit(node) if self.sites.reaches(node) else ast.Constant(None)
        if isinstance(node, ast.Compare):
            return ast.Tuple([self.reduce(x) for x in (node.left, *node.comparators)], ast.Load())
        if isinstance(node, ast.BoolOp):
            return ast.Tuple([self.reduce(x) for x in node.values], ast.Load())
        if isinstance(node, ast.UnaryOp):
            return self.reduce(node.operand)
        if isinstance(node, ast.IfExp):
            return ast.Tuple([self.reduce(x) for x in (node.test, node.body, node.orelse)], ast.Load())
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("all", "any")
                and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], _COMPS)):
            node = node.args[0]
        if isinstance(node, _COMPS):
            gens = [self.visit(g) for g in node.generators]
            return ast.ListComp(elt=self.reduce(node.elt), generators=gens)
        if isinstance(node, ast.DictComp) or any(isinstance(n, ast.Lambda) and self.sites.depends(n)
                                                  for n in ast.walk(node)):
            return self.visit(node)  # whatever calls the lambda must run for its values to be recorded
        # anything else only evaluates its recorded parts: the judge's functions and
        # operators stay with the judge
        needed = (lambda c: self.sites.depends(c) or self.sites.reaches(c))  # noqa: E731
        parts = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr) and needed(c)]
        parts += [kw.value for kw in getattr(node, "keywords", ()) if needed(kw.value)]
        return ast.Tuple([self.reduce(c) for c in parts], ast.Load())


class _JudgeVersion(ast.NodeTransformer):
    """The judge's version: recorded expressions replaced by their recorded values; each
    assert bracketed so that the values the child computed for it are taken as a group
    (the child evaluated all of them, the judge may short-circuit)."""

    def __init__(self, sites: _Sites) -> None:
        self.sites = sites
        self.asserts = 0

    def visit(self, node: ast.AST) -> ast.AST:
        k = self.sites.ids.get(id(node))
        if k is not None:
            return ast.copy_location(_call("__execrl_replay__", ast.Constant(k)), node)
        return super().visit(node)

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        j = self.asserts
        self.asserts += 1
        test = self.visit(node.test)
        return [ast.Expr(_call("__execrl_enter__", ast.Constant(j))),
                ast.Assert(test=test, msg=ast.Constant(j)),
                ast.Expr(_call("__execrl_leave__", ast.Constant(j)))]


def _assert_only_functions(tree: ast.Module, local: set[str]) -> set[str]:
    """Test-local functions (``def``) whose every use is inside an ``assert``."""
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in local}
    inside = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Assert):
            inside |= {id(x) for x in ast.walk(n)}
    used_outside = {n.id for n in ast.walk(tree)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in inside}
    return defined - used_outside


def _drop_dead_assignments(module: ast.Module) -> None:
    """Remove top-level assignments of values that do not involve the candidate and that
    nothing in the child reads (e.g. ``expected = [...]``)."""
    while True:
        loaded = _loaded_names(module)
        keep = [st for st in module.body
                if not (isinstance(st, ast.Assign) and all(isinstance(t, ast.Name) for t in st.targets)
                        and not any(t.id in loaded for t in st.targets)
                        and not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                                    and n.func.id.startswith("__execrl_") for n in ast.walk(st.value)))]
        if len(keep) == len(module.body):
            return
        module.body = keep


def _prepare_replay(src: str, tree: ast.Module, safe: frozenset[str]) -> tuple[JudgeTest, str]:
    candidate, tainted, local = _dependent_names(tree, safe)
    # the same traversal numbers the sites of both copies identically
    judge_tree = copy.deepcopy(tree)
    judge_sites = _Sites(candidate | tainted, tainted, local)
    judge_sites.find(judge_tree)
    child_sites = _Sites(candidate | tainted, tainted, local)
    child_sites.find(tree)
    sites = child_sites
    judge_tree = _JudgeVersion(judge_sites).visit(judge_tree)
    child_tree = _ChildVersion(child_sites, _assert_only_functions(tree, local)).visit(tree)
    judge_tree = GuardOps().visit(judge_tree)
    ast.fix_missing_locations(judge_tree)
    ast.fix_missing_locations(child_tree)
    _drop_dead_assignments(child_tree)
    code = compile(judge_tree, "<test>", "exec", dont_inherit=True)
    return JudgeTest(src, "r", code, timed=True, sites=sites.sources), ast.unparse(child_tree)

