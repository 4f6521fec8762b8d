"""The package's layers: no import cycle between modules, and no import from a lower layer to a higher one.

Every module of `src/execrl` is parsed (nothing is imported) and every import of an execrl module
is collected: at module level and inside functions and methods alike, `from execrl.x import y`
naming the submodule `execrl.x.y` where `y` is one, relative imports resolved against the
importing module. An import names one module: importing `execrl.a.b` runs `execrl/a/__init__.py`
too, but that package file is not counted as imported (a package's `__init__` re-exporting its own
submodules would otherwise make every package a cycle). Strings naming a module (`python -m
execrl.x` in a command line) are not imports.

    python tests/test_layers.py [SRC]     # the back-edges and cycles of SRC (default: this checkout's src)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

# The layers, lowest first. A module may import its own layer and the layers below; a package or
# module named here holds everything under it (the longest name that matches decides), and a new
# module must be placed (test_every_module_is_in_a_layer).
LAYERS: tuple[tuple[str, ...], ...] = (
    # Building blocks every stage reads, importing no other layer: files, problems, the two prompt
    # formats (first attempt, SRRL's refinement), the CPU kernel pin, the method registry (a table).
    ("execrl", "execrl.jsonl", "execrl.problems", "execrl.prompting", "execrl.refinement", "execrl.compute",
     "execrl.methods"),
    # Loads problems from their sources into the problem format; runs nothing.
    ("execrl.datasets",),
    # Runs programs against problems; its differential check loads data sets to run.
    ("execrl.sandbox",),
    # The reward-hacking watch: held-out tests and tamper signals over programs the sandbox ran. A
    # library the trainers' rewards and monitor call, and the report reads.
    ("execrl.watch",),
    # The tiny model and staged hub models; imports no other layer.
    ("execrl.models",),
    # Samples completions (transformers, vLLM) and keeps vLLM's weights in step with a trainer.
    ("execrl.generation",),
    # Scores programs (pass@k, diversity) and evaluates a policy at intervals: it trains nothing, so
    # it lies below training and the trainers call it as a library (no trainer is imported here).
    ("execrl.evaluation",),
    # The game engines: rules, fixed opponents, how a match is played. No training.
    ("execrl.games",),
    # Preference pairs and n-best lists ranked from annotated candidates.
    ("execrl.training_data",),
    # The trainers (SFT, DPO, GRPO, SRRL, exec, the code game, SPIRAL) on everything above.
    ("execrl.training",),
    # The run's config: merged and checked against what the trainers accept (sampling keys, SRRL's
    # budgets, the code game's retired opponent), so above them.
    ("execrl.config",),
    # What each method's training job trains with, assembled from the config.
    ("execrl.training_settings",),
    # Result paths: digests of each level's settings, training's included.
    ("execrl.run_paths",),
    # Cluster nodes, memory plans, resources, the accelerate launch, the preflight: they size and
    # start training jobs from their settings, and measure a trainer's step.
    ("execrl.planning",),
    # The report reads everyone's outputs, and the planned resources for its cost table.
    ("execrl.report",),
)


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer} -> {self.imported} (line {self.line})"


def module_files(src: Path, package: str = "execrl") -> dict[str, Path]:
    """Every module under `src/package`, by its dotted name (a package by its own name)."""
    root = src / package.replace(".", "/")
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _module_of(name: str, modules: Iterable[str]) -> str | None:
    """The module `name` refers to: itself, else its longest prefix that is a module."""
    modules = set(modules)
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def collect_imports(modules: Mapping[str, str], root: str = "execrl") -> list[Import]:
    """The execrl imports of each module, given as module name -> source text. Package modules
    (whose source is their `__init__.py`) must be told apart: a name with a module below it is one."""
    names = set(modules)
    packages = {name.rpartition(".")[0] for name in names if "." in name}
    found: list[Import] = []
    for importer, text in modules.items():
        tree = ast.parse(text)
        own_package = importer if importer in packages else importer.rpartition(".")[0]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = own_package.split(".")
                    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                    base_name = ".".join(base + ([node.module] if node.module else []))
                else:
                    base_name = node.module or ""
                if not (base_name == root or base_name.startswith(root + ".")):
                    continue
                for alias in node.names:
                    sub = f"{base_name}.{alias.name}"
                    targets.append(sub if sub in names else base_name)
            for target in targets:
                if not (target == root or target.startswith(root + ".")):
                    continue
                module = _module_of(target, names)
                if module is not None and module != importer:
                    found.append(Import(importer, module, node.lineno))
    return sorted(set(found), key=lambda i: (i.importer, i.imported, i.line))


def layer_of(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> int | None:
    best, best_len = None, -1
    for index, names in enumerate(layers):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = index, len(name)
    return best


def climbs(imports: Iterable[Import], layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[Import]:
    """Imports from a lower layer to a higher one."""
    return [i for i in imports if (layer_of(i.importer, layers) or 0) < (layer_of(i.imported, layers) or 0)]


def unplaced(modules: Iterable[str], layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    return sorted(m for m in modules if layer_of(m, layers) is None)


def cycles(imports: Iterable[Import]) -> list[list[str]]:
    """One cycle of modules (first module repeated last) for each strongly connected set of modules."""
    graph: dict[str, set[str]] = {}
    for i in imports:
        graph.setdefault(i.importer, set()).add(i.imported)
        graph.setdefault(i.imported, set())
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    found = []
    for component in components:
        # The shortest way back to the first module, through the component only.
        first = min(component)
        paths = {first: [first]}
        queue = [first]
        cycle = None
        while queue and cycle is None:
            node = queue.pop(0)
            for child in sorted(graph[node] & component):
                if child == first:
                    cycle = paths[node] + [first]
                    break
                if child not in paths:
                    paths[child] = paths[node] + [child]
                    queue.append(child)
        found.append(cycle)
    return sorted(found)


def cycle_pairs(cycle: list[str]) -> str:
    return ", ".join(f"{a} -> {b}" for a, b in zip(cycle, cycle[1:]))


def read_modules(src: Path) -> dict[str, str]:
    return {name: path.read_text() for name, path in module_files(src).items()}


# The checks of this checkout.

MODULES = read_modules(SRC)
IMPORTS = collect_imports(MODULES)


def test_every_module_is_in_a_layer():
    assert not unplaced(MODULES), f"modules in no layer of LAYERS: {unplaced(MODULES)}"


def test_no_import_climbs_a_layer():
    found = climbs(IMPORTS)
    assert not found, "imports from a lower layer to a higher one (importer -> imported):\n" + "\n".join(
        f"  {i}  [layer {layer_of(i.importer)} -> {layer_of(i.imported)}]" for i in found
    )


def test_no_import_cycle():
    found = cycles(IMPORTS)
    assert not found, "import cycles (each importer -> imported pair on the cycle):\n" + "\n".join(
        f"  {cycle_pairs(c)}" for c in found
    )


def test_the_checker_sees_imports_inside_functions_and_submodules():
    # Sanity: the collection finds the kinds of import the checks rely on in this checkout.
    pairs = {(i.importer, i.imported) for i in IMPORTS}
    assert ("execrl.datasets", "execrl.datasets.builtin") in pairs  # `from execrl.datasets import builtin`
    assert ("execrl.generation", "execrl.generation.vllm_backend") in pairs  # inside a function


# The checker, shown able to fail.

SYNTHETIC = {
    "execrl": "",
    "execrl.low": "",
    "execrl.low.a": "def f():\n    from execrl.low import b\n",  # in a function, a submodule by name
    "execrl.low.b": "from . import c\n",  # relative
    "execrl.low.c": "import execrl.low.a\n",  # closes a -> b -> c -> a
    "execrl.high": "from execrl.low.a import f\n",
    "execrl.high.x": "from ..low import a\n",
    "execrl.low.d": "class C:\n    def m(self):\n        from execrl.high.x import g\n",  # climbs
    "execrl.stray": "",
}
SYNTHETIC_LAYERS = (("execrl", "execrl.low"), ("execrl.high",))


def test_checker_reports_a_cycle_with_its_pairs():
    imports = collect_imports(SYNTHETIC)
    found = cycles(imports)
    assert found == [["execrl.low.a", "execrl.low.b", "execrl.low.c", "execrl.low.a"]]
    assert cycle_pairs(found[0]) == "execrl.low.a -> execrl.low.b, execrl.low.b -> execrl.low.c, execrl.low.c -> execrl.low.a"


def test_checker_reports_a_climb_with_its_pair():
    imports = collect_imports(SYNTHETIC)
    assert [(i.importer, i.imported, i.line) for i in climbs(imports, SYNTHETIC_LAYERS)] == [
        ("execrl.low.d", "execrl.high.x", 3)
    ]
    # Downward imports, relative ones included, are not climbs.
    assert ("execrl.high.x", "execrl.low.a") in {(i.importer, i.imported) for i in imports}
    assert ("execrl.high", "execrl.low.a") in {(i.importer, i.imported) for i in imports}


def test_checker_fails_on_synthetic_modules():
    imports = collect_imports(SYNTHETIC)
    with pytest.raises(AssertionError, match=r"execrl\.low\.d -> execrl\.high\.x"):
        found = climbs(imports, SYNTHETIC_LAYERS)
        assert not found, "\n".join(map(str, found))
    with pytest.raises(AssertionError, match=r"execrl\.low\.c -> execrl\.low\.a"):
        found = cycles(imports)
        assert not found, "\n".join(cycle_pairs(c) for c in found)


def test_checker_names_a_module_outside_the_layers():
    assert unplaced(SYNTHETIC, SYNTHETIC_LAYERS) == []
    assert unplaced(SYNTHETIC, (("execrl.low",), ("execrl.high",))) == ["execrl", "execrl.stray"]


def report(src: Path) -> tuple[list[Import], list[list[str]]]:
    imports = collect_imports(read_modules(src))
    return climbs(imports), cycles(imports)


if __name__ == "__main__":
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else SRC
    modules = read_modules(src)
    imports = collect_imports(modules)
    up, loops = climbs(imports), cycles(imports)
    for module in unplaced(modules):
        print(f"unplaced: {module}")
    print(f"{len(up)} back-edges (imports climbing a layer):")
    for i in up:
        print(f"  {i}  [layer {layer_of(i.importer)} -> {layer_of(i.imported)}]")
    print(f"{len(loops)} cycles:")
    for c in loops:
        print(f"  {cycle_pairs(c)}")
