"""The task templates of the :mod:`execrl.datasets.builtin` suite, registered by family and difficulty.

Each template draws one task (:class:`Spec`) from a seeded ``random.Random``: its parameters, the
prompt's phrase, the reference's body and a sampler of argument values. :data:`TEMPLATES` holds them
in registration order, which is part of the draw: :mod:`execrl.datasets.builtin` picks a template by
its position, so reordering or inserting templates changes every generated split.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

LETTERS = "abcdefghiklmnoprstuy"
WORDS = ("cat", "dog", "sun", "tree", "blue", "red", "run", "big", "sky", "map", "pen", "cup")
SUFFIXES = ("ab", "xy", "ing", "ed", "ok", "!", "-", "zz")
WORD_PAIRS = (("yes", "no"), ("big", "small"), ("high", "low"), ("on", "off"), ("hot", "cold"))


# ------------------------------------------------------------------------------ task specs


@dataclass
class Spec:
    """One task before naming: ``{a}`` stands for the argument, ``{e}`` for its element."""

    template: str
    params: dict[str, Any]
    kind: str  # argument type: "int", "str" or "list"
    phrase: str  # completes "Write a function f(a) that ..."
    body: list[str]  # reference body lines, without indentation
    sample: Callable[[random.Random], Any]  # draws one argument value
    branch: str | None = None  # a condition both of whose outcomes the tests must cover


TEMPLATES: dict[tuple[str, int], list[tuple[str, Callable[[random.Random], Spec]]]] = {}


def template(family: str, difficulty: int) -> Callable:
    def register(function: Callable[[random.Random], Spec]) -> Callable[[random.Random], Spec]:
        TEMPLATES.setdefault((family, difficulty), []).append((function.__name__, function))
        return function

    return register


# ------------------------------------------------------------------------------ samplers


def ints(low: int, high: int) -> Callable[[random.Random], int]:
    return lambda rng: rng.randint(low, high)


def words(focus: str = "", mixed: bool = False, low: int = 1, high: int = 8) -> Callable[[random.Random], str]:
    """Random lowercase strings; ``focus`` characters are inserted in about half of them."""

    def sample(rng: random.Random) -> str:
        letters = [rng.choice(LETTERS) for _ in range(rng.randint(low, high))]
        if focus and rng.random() < 0.6:
            for _ in range(rng.randint(1, 3)):
                letters.insert(rng.randrange(len(letters) + 1), rng.choice(focus))
        if mixed:
            letters = [c.upper() if rng.random() < 0.4 else c for c in letters]
        return "".join(letters)

    return sample


def sentences(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))


def int_lists(
    low: int = 0, high: int = 9, min_len: int = 1, max_len: int = 6, focus: int | None = None
) -> Callable[[random.Random], list[int]]:
    def sample(rng: random.Random) -> list[int]:
        values = [rng.randint(low, high) for _ in range(rng.randint(min_len, max_len))]
        if focus is not None and rng.random() < 0.6:
            for _ in range(rng.randint(1, 2)):
                values.insert(rng.randrange(len(values) + 1), focus)
        return values

    return sample


# ------------------------------------------------------------------------------ shared pieces

# Integer operations: (noun phrase, verb phrase, operator, precedence, constant range).
ARITH_OPS = {
    "add": ("{t} plus {k}", "adds {k} to {t}", "+", 1, (1, 20)),
    "sub": ("{t} minus {k}", "subtracts {k} from {t}", "-", 1, (1, 20)),
    "mul": ("{t} times {k}", "multiplies {t} by {k}", "*", 2, (2, 9)),
    "floordiv": ("{t} divided by {k}, rounded down", "divides {t} by {k}, rounding down", "//", 2, (2, 9)),
    "mod": ("the remainder of {t} divided by {k}", "takes the remainder of {t} divided by {k}", "%", 2, (2, 9)),
    "square": ("{t} squared", "squares {t}", "**", 3, None),
}


def _draw_arith(rng: random.Random, ops: Iterable[str]) -> tuple[str, int | None]:
    op = rng.choice(list(ops))
    bounds = ARITH_OPS[op][4]
    return op, (None if bounds is None else rng.randint(*bounds))


def _arith_code(op: str, k: int | None, operand: str, operand_prec: int = 4) -> tuple[str, int]:
    _, _, symbol, prec, _ = ARITH_OPS[op]
    if operand_prec < prec:
        operand = f"({operand})"
    right = "2" if op == "square" else str(k)
    return f"{operand} {symbol} {right}", prec


def _arith_noun(op: str, k: int | None, t: str) -> str:
    return ARITH_OPS[op][0].format(t=t, k=k)


# Integer conditions: (phrase about {t}, code about {e}).
INT_CONDS = {
    "even": ("{t} is even", "{e} % 2 == 0"),
    "odd": ("{t} is odd", "{e} % 2 == 1"),
    "gt": ("{t} is greater than {k}", "{e} > {k}"),
    "lt": ("{t} is less than {k}", "{e} < {k}"),
    "ge": ("{t} is at least {k}", "{e} >= {k}"),
    "le": ("{t} is at most {k}", "{e} <= {k}"),
    "eq": ("{t} is equal to {k}", "{e} == {k}"),
    "div": ("{t} is divisible by {k}", "{e} % {k} == 0"),
}


def _draw_int_cond(rng: random.Random, kinds: Iterable[str] | None = None, low: int = 0, high: int = 15) -> dict:
    kind = rng.choice(list(kinds or INT_CONDS))
    if kind in ("even", "odd"):
        return {"cond": kind}
    if kind == "div":
        return {"cond": kind, "k": rng.randint(3, 5)}
    return {"cond": kind, "k": rng.randint(low, high)}


def _int_cond(cond: dict, t: str, e: str) -> tuple[str, str]:
    phrase, code = INT_CONDS[cond["cond"]]
    k = cond.get("k")
    return phrase.format(t=t, k=k), code.format(e=e, k=k)


# List-element conditions: (adjective phrase, code about {e}).
LIST_CONDS = {
    "gt": ("greater than {k}", "{e} > {k}"),
    "lt": ("less than {k}", "{e} < {k}"),
    "even": ("even", "{e} % 2 == 0"),
    "odd": ("odd", "{e} % 2 == 1"),
}


def _draw_list_cond(rng: random.Random) -> dict:
    kind = rng.choice(list(LIST_CONDS))
    return {"cond": kind} if kind in ("even", "odd") else {"cond": kind, "k": rng.randint(2, 7)}


def _list_cond(cond: dict) -> tuple[str, str]:
    phrase, code = LIST_CONDS[cond["cond"]]
    return phrase.format(k=cond.get("k")), code.format(e="{e}", k=cond.get("k"))


# Element maps: (noun suffix "x plus 3", gerund "adding 3 to each", passive "increased by 3", code).
LIST_MAPS = {
    "add": ("plus {k}", "adding {k} to each", "increased by {k}", "{e} + {k}"),
    "mul": ("times {k}", "multiplying each by {k}", "multiplied by {k}", "{e} * {k}"),
    "square": ("squared", "squaring each", "squared", "{e} ** 2"),
}


def _draw_map(rng: random.Random) -> dict:
    kind = rng.choice(list(LIST_MAPS))
    if kind == "square":
        return {"map": kind}
    return {"map": kind, "k": rng.randint(1, 9) if kind == "add" else rng.randint(2, 5)}


def _map(mapping: dict, e: str = "{e}") -> tuple[str, str, str, str]:
    noun, gerund, passive, code = LIST_MAPS[mapping["map"]]
    k = mapping.get("k")
    return noun.format(k=k), gerund.format(k=k), passive.format(k=k), code.format(e=e, k=k)


# String operations: (noun phrase, verb phrase, code builder, result precedence).
# Code builders take (operand code, operand precedence); precedence: 1 "+", 2 "*", 9 atom.
def _postfix(suffix: str) -> Callable[[str, int], str]:
    return lambda operand, prec: (operand if prec == 9 else f"({operand})") + suffix


STR_OPS = {
    "upper": ("{t} in upper case", "converts {t} to upper case", lambda p: _postfix(".upper()"), 9),
    "lower": ("{t} in lower case", "converts {t} to lower case", lambda p: _postfix(".lower()"), 9),
    "reverse": ("{t} reversed", "reverses {t}", lambda p: _postfix("[::-1]"), 9),
    "first": ("the first {k} characters of {t}", "takes the first {k} characters of {t}",
              lambda p: _postfix(f"[:{p['k']}]"), 9),
    "last": ("the last {k} characters of {t}", "takes the last {k} characters of {t}",
             lambda p: _postfix(f"[-{p['k']}:]"), 9),
    "repeat": ("{t} repeated {k} times", "repeats {t} {k} times",
               lambda p: lambda o, prec: (o if prec >= 2 else f"({o})") + f" * {p['k']}", 2),
    "append": ('{t} followed by "{c}"', 'appends "{c}" to {t}', lambda p: lambda o, prec: f"{o} + {p['c']!r}", 1),
    "prepend": ('"{c}" followed by {t}', 'puts "{c}" in front of {t}', lambda p: lambda o, prec: f"{p['c']!r} + {o}", 1),
    "replace": ('{t} with every "{c}" replaced by "{d}"', 'replaces every "{c}" in {t} with "{d}"',
                lambda p: _postfix(f".replace({p['c']!r}, {p['d']!r})"), 9),
    "remove": ('{t} with every "{c}" removed', 'removes every "{c}" from {t}',
               lambda p: _postfix(f".replace({p['c']!r}, '')"), 9),
}  # fmt: skip


def _draw_str_op(rng: random.Random, ops: Iterable[str] | None = None) -> dict:
    op = rng.choice(list(ops or STR_OPS))
    params: dict[str, Any] = {"op": op}
    if op in ("first", "last"):
        params["k"] = rng.randint(2, 4)
    elif op == "repeat":
        params["k"] = rng.randint(2, 4)
    elif op in ("append", "prepend"):
        params["c"] = rng.choice(SUFFIXES)
    elif op in ("replace", "remove"):
        params["c"], params["d"] = rng.sample("aeiost", 2)
    return params


def _str_noun(params: dict, t: str) -> str:
    return STR_OPS[params["op"]][0].format(t=t, k=params.get("k"), c=params.get("c"), d=params.get("d"))


def _str_verb(params: dict, t: str) -> str:
    return STR_OPS[params["op"]][1].format(t=t, k=params.get("k"), c=params.get("c"), d=params.get("d"))


def _str_code(params: dict, operand: str, operand_prec: int = 9) -> tuple[str, int]:
    _, _, builder, prec = STR_OPS[params["op"]]
    return builder(params)(operand, operand_prec), prec


def _str_focus(*params: dict) -> str:
    """Characters that string inputs should often contain (the ones being replaced / removed)."""
    return "".join(p.get("c", "") for p in params if p["op"] in ("replace", "remove"))


def _needs_mixed_case(*params: dict) -> bool:
    return any(p.get("op") in ("lower", "upper") for p in params)


# ------------------------------------------------------------------------------ arith


@template("arith", 1)
def arith_op(rng: random.Random) -> Spec:
    op = rng.choice(list(ARITH_OPS) + ["abs", "max", "min"])
    if op == "abs":
        return Spec(
            "arith_op", {"op": op}, "int", "returns the absolute value of {a}", ["return abs({a})"], ints(-20, 20)
        )
    if op in ("max", "min"):
        k = rng.randint(0, 20)
        word = "larger" if op == "max" else "smaller"
        return Spec("arith_op", {"op": op, "k": k}, "int", f"returns the {word} of {{a}} and {k}",
                    [f"return {op}({{a}}, {k})"], ints(k - 10, k + 10))  # fmt: skip
    bounds = ARITH_OPS[op][4]
    k = None if bounds is None else rng.randint(*bounds)
    code, _ = _arith_code(op, k, "{a}")
    params = {"op": op} if k is None else {"op": op, "k": k}
    return Spec("arith_op", params, "int", f"returns {_arith_noun(op, k, '{a}')}", [f"return {code}"], ints(0, 40))


@template("arith", 2)
def arith_two_ops(rng: random.Random) -> Spec:
    first, k1 = _draw_arith(rng, ARITH_OPS)
    second, k2 = _draw_arith(rng, [op for op in ARITH_OPS if op != first])
    inner, prec = _arith_code(first, k1, "{a}")
    code, _ = _arith_code(second, k2, inner, prec)
    verb1 = ARITH_OPS[first][1].format(t="{a}", k=k1)
    verb2 = ARITH_OPS[second][1].format(t="the result", k=k2)
    params = {"op1": first, "k1": k1, "op2": second, "k2": k2}
    return Spec("arith_two_ops", params, "int", f"{verb1}, then {verb2}, and returns it", [f"return {code}"],
                ints(0, 30))  # fmt: skip


@template("arith", 3)
def arith_conditional(rng: random.Random) -> Spec:
    cond = _draw_int_cond(rng, ("even", "odd", "gt", "lt", "div"), 3, 15)
    branches = []
    for _ in range(2):
        op, k = _draw_arith(rng, ("add", "sub", "mul"))
        branches.append((op, k))
    if branches[0] == branches[1]:
        branches[1] = ("mul", branches[0][1] + 1) if branches[0][0] != "mul" else ("add", branches[0][1])
    phrase_cond, code_cond = _int_cond(cond, "{a}", "{a}")
    (op1, k1), (op2, k2) = branches
    phrase = f"returns {_arith_noun(op1, k1, '{a}')} if {phrase_cond}, and {_arith_noun(op2, k2, '{a}')} otherwise"
    body = [
        f"if {code_cond}:",
        f"    return {_arith_code(op1, k1, '{a}')[0]}",
        f"return {_arith_code(op2, k2, '{a}')[0]}",
    ]
    params = {**cond, "op1": op1, "k1": k1, "op2": op2, "k2": k2}
    return Spec("arith_conditional", params, "int", phrase, body, ints(0, 25), branch=code_cond)


# ------------------------------------------------------------------------------ compare


def _cond_range(*conds: dict) -> Callable[[random.Random], int]:
    ks = [c["k"] for c in conds if "k" in c and c["cond"] != "div"] or [5]
    return ints(min(ks) - 6, max(ks) + 6)


@template("compare", 1)
def compare_one(rng: random.Random) -> Spec:
    cond = _draw_int_cond(rng)
    phrase, code = _int_cond(cond, "{a}", "{a}")
    return Spec("compare_one", cond, "int", f"returns True if {phrase}, and False otherwise", [f"return {code}"],
                _cond_range(cond))  # fmt: skip


@template("compare", 2)
def compare_two(rng: random.Random) -> Spec:
    first = _draw_int_cond(rng)
    second = _draw_int_cond(rng, [kind for kind in INT_CONDS if kind != first["cond"]])
    joiner = rng.choice(("and", "or"))
    phrase1, code1 = _int_cond(first, "{a}", "{a}")
    phrase2, code2 = _int_cond(second, "{a}", "{a}")
    params = {"cond1": first, "join": joiner, "cond2": second}
    return Spec("compare_two", params, "int", f"returns True if {phrase1} {joiner} {phrase2}, and False otherwise",
                [f"return {code1} {joiner} {code2}"], _cond_range(first, second))  # fmt: skip


@template("compare", 3)
def compare_words(rng: random.Random) -> Spec:
    cond = _draw_int_cond(rng)
    yes, no = rng.choice(WORD_PAIRS)
    phrase, code = _int_cond(cond, "{a}", "{a}")
    params = {**cond, "words": [yes, no]}
    body = [f"if {code}:", f"    return {yes!r}", f"return {no!r}"]
    return Spec("compare_words", params, "int", f'returns "{yes}" if {phrase}, and "{no}" otherwise', body,
                _cond_range(cond), branch=code)  # fmt: skip


# ------------------------------------------------------------------------------ string


@template("string", 1)
def string_op(rng: random.Random) -> Spec:
    op = _draw_str_op(rng)
    code, _ = _str_code(op, "{a}")
    sample = words(focus=_str_focus(op), mixed=_needs_mixed_case(op))
    return Spec("string_op", op, "str", f"returns {_str_noun(op, '{a}')}", [f"return {code}"], sample)


# Pairs that undo or shadow each other, never composed.
_CANCELLING = ({"upper", "lower"}, {"remove", "replace"})


@template("string", 2)
def string_two_ops(rng: random.Random) -> Spec:
    first = _draw_str_op(rng)
    while True:
        second = _draw_str_op(rng)
        ops = {first["op"], second["op"]}
        if second["op"] != first["op"] and ops not in _CANCELLING:
            break
    inner, prec = _str_code(first, "{a}")
    code, _ = _str_code(second, inner, prec)
    phrase = f"{_str_verb(first, '{a}')}, then {_str_verb(second, 'the result')}, and returns it"
    sample = words(focus=_str_focus(first, second), mixed=_needs_mixed_case(first, second))
    return Spec("string_two_ops", {"op1": first, "op2": second}, "str", phrase, [f"return {code}"], sample)


STR_CONDS = {
    "longer": ("{t} has more than {k} characters", "len({t}) > {k}"),
    "shorter": ("{t} has fewer than {k} characters", "len({t}) < {k}"),
    "starts": ('{t} starts with "{c}"', "{t}.startswith({c!r})"),
    "ends": ('{t} ends with "{c}"', "{t}.endswith({c!r})"),
    "contains": ('{t} contains "{c}"', "{c!r} in {t}"),
}


@template("string", 3)
def string_conditional(rng: random.Random) -> Spec:
    kind = rng.choice(list(STR_CONDS))
    cond: dict[str, Any] = {"cond": kind}
    if kind in ("longer", "shorter"):
        cond["k"] = rng.randint(2, 5)
    else:
        cond["c"] = rng.choice("aeiost")
    phrase_cond = STR_CONDS[kind][0].format(t="{a}", k=cond.get("k"), c=cond.get("c"))
    code_cond = STR_CONDS[kind][1].format(t="{a}", k=cond.get("k"), c=cond.get("c"))
    simple = ("upper", "reverse", "repeat", "first", "last", "append", "prepend")
    yes = _draw_str_op(rng, simple)
    no = (
        _draw_str_op(rng, [op for op in simple if op != yes["op"]] + ["same"]) if rng.random() < 0.8 else {"op": "same"}
    )
    no_noun = "{a} unchanged" if no["op"] == "same" else _str_noun(no, "{a}")
    no_code = "{a}" if no["op"] == "same" else _str_code(no, "{a}")[0]
    phrase = f"returns {_str_noun(yes, '{a}')} if {phrase_cond}, and {no_noun} otherwise"
    body = [f"if {code_cond}:", f"    return {_str_code(yes, '{a}')[0]}", f"return {no_code}"]
    sample = words(focus=cond.get("c", ""), low=1, high=7)
    return Spec("string_conditional", {**cond, "then": yes, "else": no}, "str", phrase, body, sample, branch=code_cond)


@template("string", 3)
def string_each_char(rng: random.Random) -> Spec:
    if rng.random() < 0.5:
        k = rng.randint(2, 3)
        return Spec("string_each_char", {"op": "double", "k": k}, "str",
                    f"returns a string made of each character of {{a}} repeated {k} times",
                    [f"return ''.join({{e}} * {k} for {{e}} in {{a}})"], words(high=5))  # fmt: skip
    return Spec("string_each_char", {"op": "no_vowels"}, "str", "returns {a} with all vowels removed",
                ["return ''.join({e} for {e} in {a} if {e} not in 'aeiou')"], words(focus="aeiou"))  # fmt: skip


# ------------------------------------------------------------------------------ list

LIST_AGGREGATES = {
    "sum": ("the sum of the elements of {a}", "sum({a})"),
    "max": ("the largest element of {a}", "max({a})"),
    "min": ("the smallest element of {a}", "min({a})"),
    "sorted": ("{a} sorted in increasing order", "sorted({a})"),
    "sorted_desc": ("{a} sorted in decreasing order", "sorted({a}, reverse=True)"),
    "reverse": ("{a} in reverse order", "{a}[::-1]"),
    "first": ("the first element of {a}", "{a}[0]"),
    "last": ("the last element of {a}", "{a}[-1]"),
}


@template("list", 1)
def list_aggregate(rng: random.Random) -> Spec:
    op = rng.choice(list(LIST_AGGREGATES))
    phrase, code = LIST_AGGREGATES[op]
    return Spec("list_aggregate", {"op": op}, "list", f"returns {phrase}", [f"return {code}"], int_lists(min_len=2))


@template("list", 1)
def list_map(rng: random.Random) -> Spec:
    mapping = _draw_map(rng)
    noun, _, _, code = _map(mapping)
    return Spec("list_map", mapping, "list", f"returns a list of each element of {{a}} {noun}",
                [f"return [{code} for {{e}} in {{a}}]"], int_lists(min_len=0))  # fmt: skip


@template("list", 1)
def list_filter(rng: random.Random) -> Spec:
    cond = _draw_list_cond(rng)
    phrase, code = _list_cond(cond)
    return Spec("list_filter", cond, "list", f"returns a list of the elements of {{a}} that are {phrase}",
                [f"return [{{e}} for {{e}} in {{a}} if {code}]"], int_lists(max_len=7))  # fmt: skip


@template("list", 1)
def list_slice(rng: random.Random) -> Spec:
    k = rng.randint(2, 3)
    if rng.random() < 0.5:
        return Spec("list_slice", {"op": "first", "k": k}, "list", f"returns the first {k} elements of {{a}}",
                    [f"return {{a}}[:{k}]"], int_lists(max_len=6))  # fmt: skip
    return Spec("list_slice", {"op": "last", "k": k}, "list", f"returns the last {k} elements of {{a}}",
                [f"return {{a}}[-{k}:]"], int_lists(max_len=6))  # fmt: skip


@template("list", 2)
def list_filter_aggregate(rng: random.Random) -> Spec:
    cond = _draw_list_cond(rng)
    adjective, code = _list_cond(cond)
    op = rng.choice(("sum", "max", "min", "sorted"))
    generator = f"{{e}} for {{e}} in {{a}} if {code}"
    phrase = {
        "sum": f"the sum of the elements of {{a}} that are {adjective}",
        "max": f"the largest element of {{a}} that is {adjective}",
        "min": f"the smallest element of {{a}} that is {adjective}",
        "sorted": f"the elements of {{a}} that are {adjective}, sorted in increasing order",
    }[op]
    return Spec("list_filter_aggregate", {**cond, "op": op}, "list", f"returns {phrase}",
                [f"return {op}({generator})"], int_lists(max_len=7))  # fmt: skip


@template("list", 2)
def list_map_aggregate(rng: random.Random) -> Spec:
    mapping = _draw_map(rng)
    _, gerund, _, code = _map(mapping)
    op = rng.choice(("sum", "max", "min"))
    noun = {"sum": "the sum of the elements", "max": "the largest element", "min": "the smallest element"}[op]
    return Spec("list_map_aggregate", {**mapping, "op": op}, "list", f"returns {noun} of {{a}} after {gerund}",
                [f"return {op}({code} for {{e}} in {{a}})"], int_lists(min_len=1))  # fmt: skip


@template("list", 2)
def list_filter_map(rng: random.Random) -> Spec:
    cond = _draw_list_cond(rng)
    mapping = _draw_map(rng)
    adjective, cond_code = _list_cond(cond)
    noun, _, _, map_code = _map(mapping)
    return Spec("list_filter_map", {**cond, **mapping}, "list",
                f"returns a list of the elements of {{a}} that are {adjective}, each {noun}",
                [f"return [{map_code} for {{e}} in {{a}} if {cond_code}]"], int_lists(max_len=7))  # fmt: skip


@template("list", 2)
def list_all_any(rng: random.Random) -> Spec:
    cond = _draw_list_cond(rng)
    adjective, code = _list_cond(cond)
    op = rng.choice(("all", "any"))
    quantifier = "every" if op == "all" else "some"
    return Spec("list_all_any", {**cond, "op": op}, "list",
                f"returns True if {quantifier} element of {{a}} is {adjective}, and False otherwise",
                [f"return {op}({code} for {{e}} in {{a}})"], int_lists(max_len=4))  # fmt: skip


@template("list", 3)
def list_first_match(rng: random.Random) -> Spec:
    cond = _draw_list_cond(rng)
    adjective, code = _list_cond(cond)
    if rng.random() < 0.5:
        body = ["for {e} in {a}:", f"    if {code}:", "        return {e}", "return -1"]
        phrase = f"returns the first element of {{a}} that is {adjective}, or -1 if there is none"
        return Spec("list_first_match", {**cond, "op": "value"}, "list", phrase, body, int_lists(max_len=5))
    index_code = code.replace("{e}", "{a}[i]")
    body = ["for i in range(len({a})):", f"    if {index_code}:", "        return i", "return -1"]
    phrase = f"returns the index of the first element of {{a}} that is {adjective}, or -1 if there is none"
    return Spec("list_first_match", {**cond, "op": "index"}, "list", phrase, body, int_lists(max_len=5))


@template("list", 3)
def list_conditional_map(rng: random.Random) -> Spec:
    cond = _draw_list_cond(rng)
    adjective, cond_code = _list_cond(cond)
    if rng.random() < 0.3:
        value = rng.randint(0, 9)
        mapping: dict[str, Any] = {"map": "replace", "value": value}
        passive, map_code = f"replaced by {value}", str(value)
    else:
        mapping = _draw_map(rng)
        _, _, passive, map_code = _map(mapping)
    phrase = (
        f"returns a list in which each element of {{a}} that is {adjective} is {passive}, "
        "and every other element is unchanged"
    )
    body = [f"return [{map_code} if {cond_code} else {{e}} for {{e}} in {{a}}]"]
    return Spec("list_conditional_map", {**cond, **mapping}, "list", phrase, body, int_lists(max_len=6))


@template("list", 3)
def list_product(rng: random.Random) -> Spec:
    return Spec("list_product", {}, "list", "returns the product of the elements of {a}",
                ["result = 1", "for {e} in {a}:", "    result *= {e}", "return result"],
                int_lists(low=1, high=6, min_len=0, max_len=4))  # fmt: skip


# ------------------------------------------------------------------------------ count


@template("count", 1)
def count_basic(rng: random.Random) -> Spec:
    op = rng.choice(("len_list", "len_str", "char", "value", "words"))
    if op == "len_list":
        return Spec("count_basic", {"op": op}, "list", "returns the number of elements in {a}", ["return len({a})"],
                    int_lists(min_len=0, max_len=7))  # fmt: skip
    if op == "len_str":
        return Spec("count_basic", {"op": op}, "str", "returns the number of characters in {a}", ["return len({a})"],
                    words(low=0))  # fmt: skip
    if op == "char":
        c = rng.choice("aeiost")
        return Spec("count_basic", {"op": op, "c": c}, "str", f'returns the number of times "{c}" appears in {{a}}',
                    [f"return {{a}}.count({c!r})"], words(focus=c))  # fmt: skip
    if op == "value":
        k = rng.randint(0, 9)
        return Spec("count_basic", {"op": op, "k": k}, "list", f"returns the number of times {k} appears in {{a}}",
                    [f"return {{a}}.count({k})"], int_lists(focus=k))  # fmt: skip
    return Spec("count_basic", {"op": op}, "str",
                "returns the number of words in {a}, where words are separated by spaces",
                ["return len({a}.split())"], sentences)  # fmt: skip


@template("count", 2)
def count_matching(rng: random.Random) -> Spec:
    op = rng.choice(("elements", "chars", "upper", "more_than"))
    if op == "elements":
        cond = _draw_list_cond(rng)
        adjective, code = _list_cond(cond)
        return Spec("count_matching", {**cond, "op": op}, "list",
                    f"returns the number of elements of {{a}} that are {adjective}",
                    [f"return len([{{e}} for {{e}} in {{a}} if {code}])"], int_lists(max_len=7))  # fmt: skip
    if op == "chars":
        chars = rng.choice(("aeiou", "".join(sorted(rng.sample("abcdeilmnorst", 2)))))
        phrase = (
            "the number of vowels in {a}"
            if chars == "aeiou"
            else (f'the number of characters of {{a}} that are "{chars[0]}" or "{chars[1]}"')
        )
        return Spec("count_matching", {"op": op, "chars": chars}, "str", f"returns {phrase}",
                    [f"return len([{{e}} for {{e}} in {{a}} if {{e}} in {chars!r}])"], words(focus=chars))  # fmt: skip
    if op == "upper":
        return Spec("count_matching", {"op": op}, "str", "returns the number of upper case letters in {a}",
                    ["return len([{e} for {e} in {a} if {e}.isupper()])"], words(mixed=True))  # fmt: skip
    c, k = rng.choice("aeiost"), rng.randint(1, 2)
    return Spec("count_matching", {"op": op, "c": c, "k": k}, "str",
                f'returns True if "{c}" appears in {{a}} more than {k} times, and False otherwise',
                [f"return {{a}}.count({c!r}) > {k}"], words(focus=c * 2))  # fmt: skip


@template("count", 3)
def count_or_default(rng: random.Random) -> Spec:
    cond = _draw_list_cond(rng)
    adjective, code = _list_cond(cond)
    default = -1
    body = [f"count = len([{{e}} for {{e}} in {{a}} if {code}])", "if count == 0:", f"    return {default}",
            "return count"]  # fmt: skip
    phrase = f"returns the number of elements of {{a}} that are {adjective}, or {default} if there are none"
    return Spec("count_or_default", {**cond, "default": default}, "list", phrase, body, int_lists(max_len=4),
                branch=f"not [{{e}} for {{e}} in {{a}} if {code}]")  # fmt: skip


@template("count", 3)
def count_threshold_words(rng: random.Random) -> Spec:
    c, k = rng.choice("aeiost"), rng.randint(2, 3)
    yes, no = rng.choice(WORD_PAIRS)
    body = [f"if {{a}}.count({c!r}) >= {k}:", f"    return {yes!r}", f"return {no!r}"]
    phrase = f'returns "{yes}" if "{c}" appears in {{a}} at least {k} times, and "{no}" otherwise'
    return Spec("count_threshold_words", {"c": c, "k": k, "words": [yes, no]}, "str", phrase, body,
                words(focus=c * 3), branch=f"{{a}}.count({c!r}) >= {k}")  # fmt: skip


# ------------------------------------------------------------------------------ loop


@template("loop", 1)
def loop_range(rng: random.Random) -> Spec:
    op = rng.choice(("list", "sum", "copies", "string"))
    if op == "list":
        k = rng.randint(0, 3)
        code = "list(range({a}))" if k == 0 else f"list(range({k}, {{a}}))"
        return Spec("loop_range", {"op": op, "k": k}, "int",
                    f"returns a list of the numbers from {k} up to but not including {{a}}", [f"return {code}"],
                    ints(k, k + 8))  # fmt: skip
    if op == "sum":
        k = rng.randint(0, 3)
        code = "sum(range({a} + 1))" if k == 0 else f"sum(range({k}, {{a}} + 1))"
        return Spec("loop_range", {"op": op, "k": k}, "int", f"returns the sum of the numbers from {k} to {{a}}",
                    [f"return {code}"], ints(k, k + 12))  # fmt: skip
    if op == "copies":
        k = rng.randint(0, 9)
        return Spec("loop_range", {"op": op, "k": k}, "int", f"returns a list containing {{a}} copies of {k}",
                    [f"return [{k}] * {{a}}"], ints(0, 5))  # fmt: skip
    c = rng.choice(SUFFIXES)
    return Spec("loop_range", {"op": op, "c": c}, "int", f'returns the string "{c}" repeated {{a}} times',
                [f"return {c!r} * {{a}}"], ints(0, 5))  # fmt: skip


@template("loop", 2)
def loop_comprehension(rng: random.Random) -> Spec:
    op = rng.choice(("sum_map", "list_map", "sum_multiples", "join"))
    if op in ("sum_map", "list_map"):
        mapping = _draw_map(rng)
        noun, _, _, code = _map(mapping, e="i")
        if op == "sum_map":
            return Spec("loop_comprehension", {**mapping, "op": op}, "int",
                        f"returns the sum of i {noun} for every i from 1 to {{a}}",
                        [f"return sum({code} for i in range(1, {{a}} + 1))"], ints(0, 9))  # fmt: skip
        return Spec("loop_comprehension", {**mapping, "op": op}, "int",
                    f"returns a list of i {noun} for every i from 1 to {{a}}",
                    [f"return [{code} for i in range(1, {{a}} + 1)]"], ints(0, 6))  # fmt: skip
    if op == "sum_multiples":
        k = rng.randint(2, 5)
        return Spec("loop_comprehension", {"op": op, "k": k}, "int",
                    f"returns the sum of the multiples of {k} that are less than {{a}}",
                    [f"return sum(i for i in range({{a}}) if i % {k} == 0)"], ints(0, 20))  # fmt: skip
    sep = rng.choice((" ", ",", "-"))
    return Spec("loop_comprehension", {"op": op, "sep": sep}, "int",
                f'returns a string of the numbers from {{a}} down to 1, separated by "{sep}"',
                [f"return {sep!r}.join(str(i) for i in range({{a}}, 0, -1))"], ints(0, 7))  # fmt: skip


@template("loop", 3)
def loop_product(rng: random.Random) -> Spec:
    k = rng.randint(1, 3)
    return Spec("loop_product", {"k": k}, "int", f"returns the product of the numbers from {k} to {{a}}",
                ["result = 1", f"for i in range({k}, {{a}} + 1):", "    result *= i", "return result"],
                ints(k, k + 6))  # fmt: skip


LOOP_STEPS = {
    "add": ("adds {k} to the value", "result += {k}"),
    "mul": ("multiplies the value by {k}", "result *= {k}"),
    "mul_add": ("multiplies the value by {k} and adds {m}", "result = result * {k} + {m}"),
    "sub": ("subtracts {k} from the value", "result -= {k}"),
}


@template("loop", 3)
def loop_iterate(rng: random.Random) -> Spec:
    step = rng.choice(list(LOOP_STEPS))
    start = rng.randint(0, 5) if step != "mul" else rng.randint(1, 5)
    k = rng.randint(2, 3) if step in ("mul", "mul_add") else rng.randint(1, 9)
    m = rng.randint(1, 3)
    params: dict[str, Any] = {"step": step, "start": start, "k": k}
    if step == "mul_add":
        params["m"] = m
    phrase_step, code_step = (text.format(k=k, m=m) for text in LOOP_STEPS[step])
    phrase = f"starts with {start}, then {{a}} times {phrase_step}, and returns the final value"
    body = [f"result = {start}", "for _ in range({a}):", f"    {code_step}", "return result"]
    return Spec("loop_iterate", params, "int", phrase, body, ints(0, 6))
