"""The sandbox's worker and judge modules: loaded in an order the boot can follow, and every
name a module uses is its own, imported by name, or a builtin.

The worker runs these modules from code objects, registered under their names, without the
package's ``__init__`` code (``executor._BOOT``; the judge process likewise); an import of
a module not loaded yet, or a name that only resolved when all of them shared one namespace,
would break a worker at start-up.
"""

from __future__ import annotations

import ast
import builtins
import dis
import importlib
import inspect
import os

import pytest

from execrl.sandbox.executor import JUDGE_MODULES, SANDBOX_DIR, WORKER_MODULES

PREFIX = "execrl.sandbox."


def _source(name: str) -> str:
    with open(os.path.join(SANDBOX_DIR, name + ".py"), encoding="utf-8") as fh:
        return fh.read()


def _package_imports(source: str) -> list[str]:
    """The ``execrl`` modules a module's source imports, anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "execrl":
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "execrl"]
    return found


def load_order_problems(order: tuple[str, ...], read=_source) -> list[str]:
    """Each import of a package module that the boot could not satisfy: a module not in the
    lists, or one loaded after its importer."""
    problems, loaded = [], set()
    for name in order:
        for imported in _package_imports(read(name)):
            short = imported.removeprefix(PREFIX)
            if not imported.startswith(PREFIX) or short not in order:
                problems.append(f"{name} imports {imported}, which the worker does not load")
            elif short not in loaded:
                problems.append(f"{name} imports {imported} before it is loaded")
        loaded.add(name)
    return problems


def _code_objects(code):
    yield code
    for const in code.co_consts:
        if inspect.iscode(const):
            yield from _code_objects(const)


def unresolved_names(source: str, namespace: dict, filename: str = "<module>") -> set[str]:
    """Global names the module's code reads that are neither in ``namespace`` (its own and
    what it imports) nor builtins; a class body's own names are its own."""
    missing = set()
    for code in _code_objects(compile(source, filename, "exec", dont_inherit=True)):
        instructions = list(dis.get_instructions(code))
        stored = {i.argval for i in instructions if i.opname in ("STORE_NAME", "DELETE_NAME")}
        for ins in instructions:
            if ins.opname == "LOAD_GLOBAL" or (ins.opname == "LOAD_NAME" and ins.argval not in stored):
                name = ins.argval
                if name not in namespace and not hasattr(builtins, name):
                    missing.add(name)
    return missing


def test_the_worker_and_judge_modules_load_in_order():
    assert load_order_problems(WORKER_MODULES) == []
    assert load_order_problems(WORKER_MODULES + JUDGE_MODULES) == []


def test_the_order_check_names_an_import_ahead_of_its_module():
    sources = {"_a": "from execrl.sandbox._b import x\n", "_b": "x = 1\n", "_c": "from execrl.config import y\n"}
    assert load_order_problems(("_a", "_b"), sources.get) == [
        "_a imports execrl.sandbox._b before it is loaded"]
    assert load_order_problems(("_b", "_c"), sources.get) == [
        "_c imports execrl.config, which the worker does not load"]


@pytest.mark.parametrize("name", WORKER_MODULES + JUDGE_MODULES)
def test_every_name_a_module_uses_is_its_own_or_imported(name):
    module = importlib.import_module(PREFIX + name)
    assert unresolved_names(_source(name), vars(module), module.__file__) == set()


def test_the_name_check_finds_a_name_that_is_not_imported():
    source = "import os\nclass A:\n    k = 1\n    j = k + 1\ndef f():\n    return os.sep, helper(A.k)\n"
    assert unresolved_names(source, {"os": os, "A": object, "f": None}) == {"helper"}


@pytest.mark.parametrize("name", WORKER_MODULES + JUDGE_MODULES)
def test_each_module_resolves_builtins_through_its_own_snapshot(name):
    """A program that patches ``builtins`` (in its run) cannot change how the harness runs:
    each module binds its functions to a private copy of the builtins."""
    module = importlib.import_module(PREFIX + name)
    snapshot = vars(module)["__builtins__"]
    assert type(snapshot) is dict and snapshot is not vars(builtins)
    own = [v for v in vars(module).values() if getattr(v, "__module__", None) == module.__name__]
    functions = [f for f in own if inspect.isfunction(f)]
    functions += [f for cls in own if inspect.isclass(cls) for f in vars(cls).values() if inspect.isfunction(f)]
    assert functions and all(f.__builtins__ is snapshot for f in functions)


def test_a_run_holds_none_of_the_harness_modules():
    """The boot registers the worker's modules under their names; the forker drops them, so
    a program finds no ``execrl`` module it did not import itself."""
    from execrl.problems import Problem
    from execrl.sandbox import ExecutionLimits, Executor

    problem = Problem(id="p", prompt="t", test_type="assert", tests=["assert f() == []"])
    program = "import sys\ndef f():\n    return sorted(n for n in sys.modules if n.split('.')[0] == 'execrl')\n"
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=5)) as ex:
        result = ex.run(problem, program)
    assert result.status == "pass", (result.error_message, result.trace)
