"""A seeded, procedurally generated suite of small Python function tasks.

Sized for a tiny language model: prompts are one templated English sentence that names the
function and its argument ("Write a function g(xs) that returns the sum of the elements of xs
that are greater than 3."), references are one to four lines in a single canonical style, and
each task has three to five ``assert`` tests whose expected values come from running the
reference (which is then checked to pass them).

Families (``metadata["family"]``) and difficulties (``metadata["difficulty"]``):

- ``arith``   integer arithmetic with constants;
- ``compare`` comparisons and boolean conditions on an integer;
- ``string``  string operations (upper/lower case, reverse, repeat, slice, append, replace);
- ``list``    list operations (sum/max/min/sort, map and filter with a constant);
- ``count``   counting characters, values and matching elements;
- ``loop``    loops over ``range``.

Difficulty 1 is one operation, 2 two composed operations, 3 a conditional or a loop. The
templates that draw each family's tasks are in :mod:`execrl.datasets.builtin_templates`.

Splits (``holdout="task"``, the only rule): a problem is a task (family, template, params) under
a function name and an argument name. Three splits share no task: ``warmup`` (what a tiny model's
warm start learns from), ``train`` (what RL trains on: tasks the warm start never saw) and ``test``
(tasks neither saw). The split is keyed on the task's reference up to renaming
(:func:`canonical_reference`: the function, its argument and every local name, loop variables
included, replaced by placeholders): with ``u`` = ``sha256(f"{seed}\\n{canonical reference}")``
(first 8 bytes as a fraction of 2**64), a problem belongs to ``test`` when ``u`` is below
:data:`TEST_SHARE`, to ``warmup`` when it is below ``TEST_SHARE + WARMUP_SHARE``, else to
``train``. So a task, every renaming of it, and every other template or parameter set that gives
the same reference up to renaming, fall in one split. What the splits do share are templates: a
test task is often a seen program shape with other constants (the manifest counts them). Within a
split each task appears under one naming (``names_per_task``: more), so a split of n problems
holds n tasks. Each split is drawn from its own seeded stream, so one split does not depend on
another's size.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from execrl.datasets._common import DatasetError, LoadResult, check_int
from execrl.datasets.builtin_templates import TEMPLATES, Spec
from execrl.problems import Problem

# 3: three splits (warmup, train, test), one naming per task within a split.
# 2: the split is keyed on the reference up to renaming (version 1 keyed on the names too).
GENERATOR_VERSION = 3
SUBSETS = ()
SPLITS = ("warmup", "train", "test")
FAMILIES = ("arith", "compare", "string", "list", "count", "loop")
TEST_SHARE = 0.25
WARMUP_SHARE = 0.40
HOLDOUTS = ("task",)
MAX_MISSES = 20_000  # consecutive draws without a new task before giving up

NAMES = (
    "f", "g", "h", "foo", "bar", "baz", "solve", "compute",
    "calc", "transform", "process", "helper", "answer", "run", "apply_rule", "check",
)  # fmt: skip
ARG_NAMES = {
    "int": ("x", "n", "a"),
    "str": ("s", "text", "word"),
    "list": ("xs", "nums", "values"),
}
# Loop variable used with each list / string argument.
ELEMENT_NAMES = {"xs": "x", "nums": "n", "values": "v", "s": "c", "text": "c", "word": "c"}


def _check_families(value: Any) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise DatasetError(f"option 'families' must be a non-empty list of family names, got {value!r}")
    unknown = sorted(set(value) - set(FAMILIES))
    if unknown:
        raise DatasetError(f"option 'families': unknown {unknown} (known: {', '.join(FAMILIES)})")
    return [family for family in FAMILIES if family in value]


def _check_holdout(value: Any) -> str:
    if value == "combo":
        raise DatasetError(
            "option 'holdout': 'combo' was removed - it keyed the split on the function and argument names too, "
            "so renamed training tasks landed in test; use 'task' (the default)"
        )
    if value not in HOLDOUTS:
        raise DatasetError(f"option 'holdout' must be one of {HOLDOUTS}, got {value!r}")
    return value


def _check_difficulty(value: Any) -> int:
    if isinstance(value, bool) or value not in (1, 2, 3):
        raise DatasetError(f"option 'max_difficulty' must be 1, 2 or 3, got {value!r}")
    return value


OPTIONS = {
    "seed": (0, check_int("seed")),
    "n_warmup": (1000, check_int("n_warmup", minimum=0)),
    "n_train": (1000, check_int("n_train", minimum=0)),
    "n_test": (200, check_int("n_test", minimum=0)),
    # Namings of one task within a split (function and argument names): 1, so n problems are n tasks.
    "names_per_task": (1, check_int("names_per_task", minimum=1)),
    "families": (list(FAMILIES), _check_families),
    "max_difficulty": (3, _check_difficulty),
    # What train and test must not share: "task" = the reference up to renaming, so no test problem
    # is a train task under other names (the schema's default; tests/test_datasets_builtin.py).
    "holdout": ("task", _check_holdout),
}


# ------------------------------------------------------------------------------ generation


@dataclass
class _Task:
    family: str
    difficulty: int
    spec: Spec
    name: str
    arg: str

    @property
    def key(self) -> str:
        """The problem: the task under its names (no two problems of a split share it)."""
        return json.dumps([self.family, self.spec.template, self.spec.params, self.name, self.arg], sort_keys=True)

    @property
    def reference(self) -> str:
        return f"def {self.name}({self.arg}):\n" + "\n".join("    " + _fill(line, self.arg) for line in self.spec.body)

    @property
    def split_key(self) -> str:
        """What decides the split: the reference up to renaming (the same for every naming of a
        body, so it is worked out once per body)."""
        body = tuple(self.spec.body)
        if body not in _SPLIT_KEYS:
            _SPLIT_KEYS[body] = canonical_reference(self.reference)
        return _SPLIT_KEYS[body]


_SPLIT_KEYS: dict[tuple[str, ...], str] = {}


@functools.lru_cache(maxsize=65536)
def canonical_reference(reference: str) -> str:
    """``reference`` up to renaming: the function, its arguments and every name bound inside it
    (loop and comprehension variables, assigned names) replaced by ``v0``, ``v1``, ... in the order
    they first appear; names it only reads (``len``, ``sum``, ...) are kept."""
    tree = ast.parse(reference)
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    placeholders: dict[str, str] = {}

    def rename(name: str) -> str:
        if name not in bound:
            return name
        return placeholders.setdefault(name, f"v{len(placeholders)}")

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            node.name = rename(node.name)
        elif isinstance(node, ast.arg):
            node.arg = rename(node.arg)
        elif isinstance(node, ast.Name):
            node.id = rename(node.id)
    return ast.unparse(tree)


def split_of_key(key: str, seed: int) -> str:
    digest = hashlib.sha256(f"{seed}\n{key}".encode("utf-8")).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    if u < TEST_SHARE:
        return "test"
    return "warmup" if u < TEST_SHARE + WARMUP_SHARE else "train"


def _fill(text: str, arg: str) -> str:
    return text.replace("{a}", arg).replace("{e}", ELEMENT_NAMES.get(arg, "e"))


def _draw_task(rng: random.Random, families: list[str], max_difficulty: int) -> _Task:
    family = rng.choice(families)
    difficulty = rng.randint(1, max_difficulty)
    _, make = rng.choice(TEMPLATES[(family, difficulty)])
    spec = make(rng)
    return _Task(family, difficulty, spec, rng.choice(NAMES), rng.choice(ARG_NAMES[spec.kind]))


def _build(task: _Task, rng: random.Random, problem_id: str) -> Problem | None:
    """Name, run and test one task; ``None`` when no informative set of tests was found."""
    spec = task.spec
    reference = task.reference
    namespace: dict[str, Any] = {}
    exec(compile(reference, "<builtin reference>", "exec"), namespace)  # noqa: S102 - generated here
    function = namespace[task.name]
    branch = None
    if spec.branch is not None:
        branch = eval(compile(f"lambda {task.arg}: {_fill(spec.branch, task.arg)}", "<branch>", "eval"))  # noqa: S307
    n_tests = rng.randint(3, 5)
    for _ in range(20):
        cases: dict[str, tuple[Any, Any]] = {}
        for _ in range(60):
            if len(cases) == n_tests:
                break
            value = spec.sample(rng)
            if repr(value) in cases:
                continue
            try:
                cases[repr(value)] = (value, function(json.loads(json.dumps(value))))
            except Exception:  # noqa: BLE001 - e.g. max() of an empty selection: draw again
                continue
        if len(cases) < 3:
            continue
        outputs = {repr(out) for _, out in cases.values()}
        if len(outputs) < 2:
            continue
        if branch is not None and len({bool(branch(v)) for v, _ in cases.values()}) < 2:
            continue
        break
    else:
        return None
    tests = [f"assert {task.name}({value!r}) == {out!r}" for value, out in cases.values()]
    _verify(reference, tests)
    return Problem(
        id=problem_id,
        prompt=f"Write a function {task.name}({task.arg}) that {_fill(spec.phrase, task.arg)}.",
        test_type="assert",
        tests=tests,
        entry_point=task.name,
        reference=reference,
        metadata={
            "family": task.family,
            "difficulty": task.difficulty,
            "template": spec.template,
            "params": spec.params,
            "function": task.name,
            "arg": task.arg,
            # The task (its reference up to renaming) as a short id: the report resamples a task's problems together.
            "task": "builtin-" + hashlib.sha256(task.split_key.encode("utf-8")).hexdigest()[:12],
        },
    )


def _verify(reference: str, tests: list[str]) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(reference, "<builtin reference>", "exec"), namespace)  # noqa: S102
    for test in tests:
        try:
            exec(compile(test, "<builtin test>", "exec"), namespace)  # noqa: S102
        except Exception as error:  # pragma: no cover - a generator bug, never a data problem
            raise AssertionError(f"builtin reference fails its own test {test!r}:\n{reference}") from error


def generate(
    split: str,
    seed: int = 0,
    n: int | None = None,
    families: Iterable[str] = FAMILIES,
    max_difficulty: int = 3,
    holdout: str = "task",
    names_per_task: int = 1,
) -> list[Problem]:
    """The ``n`` problems of one split (default size: 1000 warmup, 1000 train, 200 test), each
    task under at most ``names_per_task`` namings; ``holdout`` is the split rule (only
    ``"task"``: see the module's docstring)."""
    if split not in SPLITS:
        raise DatasetError(f"unknown builtin split {split!r} (known: {', '.join(SPLITS)})")
    if n is None:
        n = OPTIONS[f"n_{split}"][0]
    families = _check_families(list(families))
    max_difficulty = _check_difficulty(max_difficulty)
    holdout = _check_holdout(holdout)
    rng = random.Random(f"execrl-builtin:{seed}:{split}")
    seen: set[str] = set()
    namings: dict[str, int] = {}  # task (reference up to renaming) -> problems drawn of it
    problems: list[Problem] = []
    misses = 0  # draws in a row that gave no new task
    while len(problems) < n:
        misses += 1
        if misses > MAX_MISSES:
            raise DatasetError(
                f"builtin: found only {len(problems)} of {n} distinct {split} tasks for families {families} "
                f"and max_difficulty {max_difficulty}; ask for fewer"
            )
        task = _draw_task(rng, families, max_difficulty)
        key = task.key
        if key in seen or namings.get(task.split_key, 0) >= names_per_task:
            continue
        if split_of_key(task.split_key, seed) != split:
            continue
        problem = _build(task, rng, f"builtin/{split}/{len(problems):04d}")
        if problem is None:
            continue
        seen.add(key)
        namings[task.split_key] = namings.get(task.split_key, 0) + 1
        problems.append(problem)
        misses = 0
    return problems


def problem_key(problem: Problem) -> str:
    """The (family, template, params, function name, argument) of a builtin problem: unique in a split."""
    m = problem.metadata
    return json.dumps([m["family"], m["template"], m["params"], m["function"], m["arg"]], sort_keys=True)


def reference_key(problem: Problem) -> str:
    """The reference of a problem (any source) up to renaming."""
    return canonical_reference(problem.reference)


def shared_tasks(problems: list[Problem], others: list[Problem]) -> dict[str, int]:
    """How many of ``problems`` share a task with one of ``others`` (the reference up to renaming:
    a template's params do not always hold every constant of its body), and how many share a
    program shape (the template, with other constants)."""
    references = {reference_key(p) for p in others}
    templates = {p.metadata["template"] for p in others}
    return {
        "task": sum(reference_key(p) in references for p in problems),
        "template": sum(p.metadata["template"] in templates for p in problems),
    }


def load(*, split: str, source: str | None, subset: str | None, options: dict, on_malformed: str) -> LoadResult:
    if source is not None:
        raise DatasetError(f"the builtin adapter generates its problems and takes no source (got {source!r})")
    if split not in SPLITS:
        raise DatasetError(f"unknown builtin split {split!r} (known: {', '.join(SPLITS)})")
    args = (options["families"], options["max_difficulty"], options["holdout"], options["names_per_task"])

    def problems_of(name: str) -> list[Problem]:
        return generate(name, options["seed"], options[f"n_{name}"], *args)

    problems = problems_of(split)
    # The other splits as the same options make them, to count (and show) what they share: no
    # task, by construction; program shapes (templates with other constants), often.
    others = {name: problems_of(name) for name in SPLITS if name != split}
    shared = {name: shared_tasks(problems, other) for name, other in others.items()}
    seen_shapes = shared_tasks(problems, [p for other in others.values() for p in other])["template"]
    return LoadResult(
        problems=problems,
        manifest={
            "generator_version": GENERATOR_VERSION,
            "n_rows_read": len(problems),
            "n_rows_in_split": len(problems),
            "skipped": [],
            "holdout": {
                "key": options["holdout"],
                "rule": (
                    f"with u = sha256(seed + reference up to renaming) as a fraction of 2**64: test when u < "
                    f"{TEST_SHARE}, warmup when u < {TEST_SHARE + WARMUP_SHARE}, else train; a task and all its "
                    "renamings fall in one split"
                ),
                "test_share": TEST_SHARE,
                "warmup_share": WARMUP_SHARE,
                "names_per_task": options["names_per_task"],
                "n_distinct_tasks": len({reference_key(p) for p in problems}),
                "other_splits": {
                    name: {
                        "n_problems": len(others[name]),
                        "n_sharing_task": counts["task"],
                        "n_sharing_template": counts["template"],
                    }
                    for name, counts in shared.items()
                },
                "n_sharing_template_with_other_splits": seen_shapes,
                "templates_only_here": sorted(
                    {p.metadata["template"] for p in problems}
                    - {p.metadata["template"] for other in others.values() for p in other}
                ),
            },
        },
    )
