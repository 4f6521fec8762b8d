"""The sandbox's texts hold nothing per-process: the same failing program gets the same
annotation, byte for byte, in any worker of any executor, and so the same SRRL refinement
prompt. A program's object is shown by its type and a description without its memory
address; a timeout reads the same whichever limit ended the run (the CPU timer, the worker's
sum over the run's processes, the wall clock)."""

from __future__ import annotations

import json
import re
import sys

import pytest

from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.sandbox import ExecutionLimits, Executor, annotate_candidates
from execrl.sandbox.host_judge import _judge_single, _Run
from execrl.sandbox.prepared import prepare
from execrl.refinement import refinement_prompt
from execrl.training.srrl import SRRLSettings

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

LIMITS = ExecutionLimits(timeout_s=0.5, wall_timeout_s=2.0, memory_mb=256)
ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
MEASURED = ("cpu_time_s", "wall_time_s")
"""Annotation fields that are measurements of the run (``docs/formats.md``), not texts."""

SQUARE = Problem(id="det/square", prompt="Write f(x), the square of x.", test_type="assert",
                 tests=["assert f(8) == 64", "assert f(3) == 9"], entry_point="f")
SQUARE_CALL = Problem(id="det/square-call", prompt="Write f(x), the square of x.", test_type="call",
                      tests=[{"args": [8], "expected": 64}, {"args": [3], "expected": 9}], entry_point="f")

FAILING = {
    "generator": "def f(x):\n    return (i * i for i in range(x))\n",
    "map": "def f(x):\n    return map(abs, [x * x])\n",
    "function": "def f(x):\n    def square():\n        return x * x\n    return square\n",
    "instance": "class Square:\n    pass\n\ndef f(x):\n    return Square()\n",
    "bound_method": "class Square:\n    def value(self):\n        return 1\n\ndef f(x):\n    return Square().value\n",
    "key_error": "def f(x):\n    raise KeyError(object())\n",
    "key_error_at_load": "raise KeyError(object())\n\ndef f(x):\n    return x * x\n",
    "object_in_list": "def f(x):\n    return [object(), x * x]\n",
    "plain_object": "def f(x):\n    return object()\n",
    "infinite_loop": "def f(x):\n    while True:\n        pass\n",
}
SQUARE_STDIO = Problem(id="det/square-stdio", prompt="Read x, print its square.", test_type="stdio",
                       tests=[{"input": "8\n", "output": "64\n"}, {"input": "3\n", "output": "9\n"}])
FAILING_STDIO = {
    "print_object": "x = int(input())\nprint(object(), x * x)\n",
    "key_error": "x = int(input())\nraise KeyError(object())\n",
    "infinite_loop": "while True:\n    pass\n",
}
PROBLEMS = {p.id: p for p in (SQUARE, SQUARE_CALL, SQUARE_STDIO)}


def _candidates() -> list[dict]:
    out = []
    for name, code in FAILING.items():
        out.append({"problem_id": SQUARE.id, "code": code, "name": name})
        out.append({"problem_id": SQUARE_CALL.id, "code": code, "name": name})
    out += [{"problem_id": SQUARE_STDIO.id, "code": code, "name": name} for name, code in FAILING_STDIO.items()]
    return out


def _annotation_lines(records: list[dict]) -> list[str]:
    """The records as the annotate step writes them (one JSON line each), less the measurements."""
    return [json.dumps({k: v for k, v in r.items() if k not in MEASURED}, ensure_ascii=False) for r in records]


PROMPT_CONFIG = PromptConfig(template="{prompt}\nTest: {tests}\n", num_tests_shown=2)
# every field of the result a prompt can quote, the trace included
SETTINGS = SRRLSettings(feedback_tests="all",
                        refinement_template="{prompt}\n{code}\n{status}: {error}\n{failed_tests}\n{trace}\n")


def _prompts(records: list[dict]) -> list[str]:
    return [refinement_prompt(PROBLEMS[r["problem_id"]], r["code"], r, SETTINGS, PROMPT_CONFIG) for r in records]


@pytest.fixture(scope="module")
def annotated() -> dict[str, list[dict]]:
    problems, candidates = PROBLEMS, _candidates()
    runs = {}
    with Executor(workers=1, limits=LIMITS) as ex:
        runs["first"] = annotate_candidates(problems, candidates, ex)
    with Executor(workers=1, limits=LIMITS) as ex:
        runs["second"] = annotate_candidates(problems, candidates, ex)
    # one executor, two workers: the batch twice over, so that each program runs in both
    with Executor(workers=2, limits=LIMITS) as ex:
        both = annotate_candidates(problems, candidates + candidates, ex)
        runs["pool_a"], runs["pool_b"] = both[: len(candidates)], both[len(candidates):]
        runs["pool_again"] = annotate_candidates(problems, candidates, ex)
    return runs


def test_every_program_fails_as_expected(annotated):
    for record in annotated["first"]:
        want = "timeout" if record["name"] == "infinite_loop" else ("error", "fail")
        assert record["status"] in want, record
    shown = {(r["name"], r["problem_id"]): r["error_message"] for r in annotated["first"]}
    # the program's object is still named by its type and what it is
    assert "generator object" in shown["generator", SQUARE.id], shown
    assert "<generator object f.<locals>.<genexpr>>" in shown["generator", SQUARE.id], shown
    assert "map object" in shown["map", SQUARE.id], shown
    assert "function object" in shown["function", SQUARE.id], shown
    assert "Square object" in shown["instance", SQUARE_CALL.id], shown
    assert "method object" in shown["bound_method", SQUARE.id], shown
    assert "<object object>" in shown["key_error", SQUARE.id], shown
    assert "<object object>" in shown["key_error_at_load", SQUARE.id], shown
    assert "<object object>" in shown["key_error", SQUARE_STDIO.id], shown
    stdio_trace = next(r["trace"] for r in annotated["first"] if r["name"] == "print_object")
    assert "Got:\n<object object> 64" in stdio_trace, stdio_trace


def test_annotations_are_byte_identical_across_workers_and_executors(annotated):
    reference = _annotation_lines(annotated["first"])
    for name, records in annotated.items():
        assert _annotation_lines(records) == reference, name


def test_no_memory_address_reaches_an_annotation(annotated):
    for records in annotated.values():
        for line in _annotation_lines(records):
            assert not ADDRESS.search(line), line


def test_refinement_prompts_are_byte_identical_and_free_of_addresses(annotated):
    reference = _prompts(annotated["first"])
    assert all(p.encode() for p in reference)
    for name, records in annotated.items():
        prompts = _prompts(records)
        assert prompts == reference, name
        for prompt in prompts:
            assert not ADDRESS.search(prompt), prompt


TIMEOUT_PROGRAMS = {
    "cpu_timer": "def f(x):\n    while True:\n        pass\n",
    # eight processes, each under its own limit: the worker's sum over them ends the run
    "processes_together": "import os\n\ndef f(x):\n    for _ in range(3):\n        os.fork()\n    while True:\n"
                          "        pass\n",
    "wall_clock": "import time\n\ndef f(x):\n    time.sleep(1000)\n",
}


def test_one_timeout_text_whichever_limit_ends_the_run():
    with Executor(workers=1, limits=LIMITS) as ex:
        results = {name: ex.run(SQUARE, code) for name, code in TIMEOUT_PROGRAMS.items()}
    texts = {name: (r.status, r.error_type, r.error_message, r.trace, json.dumps(r.test_outcomes))
             for name, r in results.items()}
    assert texts["cpu_timer"][0] == "timeout", texts
    assert len(set(texts.values())) == 1, texts


def _judged(report: dict, info: dict | None = None) -> tuple:
    run_info = {"exit": None, "signal": None, "cpu": 0.1, "wall": 0.2, "timeout": False, "wall_killed": False,
                "cpu_killed": False, "wall_limit": 2.0, "overflow": False, "token": ""}
    run_info.update(info or {})
    r = _judge_single(prepare(SQUARE), _Run(run_info, b"", b"", b""), LIMITS.worker_limits(), report)
    return r.status, r.error_type, r.error_message, r.trace, json.dumps(r.test_outcomes)


def test_every_way_a_limit_ends_a_candidate_reads_the_same():
    """What each limit reports, as the worker reports it (which fires first is decided by the
    machine's load): one text for all."""
    gone = {"tests": [], "gone": True, "cpu": 0.0}
    during_first_test = {
        "cpu_timer": _judged(gone, {"timeout": True, "signal": 27, "cpu": 0.5}),
        "processes_together": _judged(gone, {"timeout": True, "cpu_killed": True, "cpu": 0.5}),
        "wall_clock": _judged(gone, {"timeout": True, "wall_killed": True}),
        "wall_clock_capped": _judged(gone, {"timeout": True, "wall_killed": True, "wall_limit": 1.3}),
        "rlimit_cpu": _judged(gone, {"timeout": True, "signal": 24, "cpu": 1.0}),
        "judge_timer": _judged({"died": "timeout", "cpu": 0.5}),
        "judge_wall": _judged({"died": "wall", "cpu": 0.0}),
    }
    assert len(set(during_first_test.values())) == 1, during_first_test
    status, etype, message, trace, _ = during_first_test["cpu_timer"]
    assert status == "timeout" and etype == "Timeout", during_first_test
    assert trace == f"{SQUARE.tests[0]}\nTimeout: {message}"
    # every test passed, but the run and the judging of its values together spent the budget
    passed = [["pass", None, None, ""]] * 2
    after_last_test = _judged({"tests": passed, "cpu": 0.45}, {"cpu": 0.2, "exit": 0})
    assert after_last_test[:3] == (status, etype, message), after_last_test
