"""The 974 MBPP reference solutions: exactly the known three fail, reproducibly."""

from __future__ import annotations

import json
import sys
import threading

import pytest

from execrl.problems import Problem
from execrl.sandbox import Executor

from conftest import MBPP_DIR

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux"),
    pytest.mark.skipif(not (MBPP_DIR / "mbpp.jsonl").exists(), reason="MBPP data not available"),
]


@pytest.fixture(scope="module")
def mbpp() -> list[Problem]:
    rows = [json.loads(line) for line in (MBPP_DIR / "mbpp.jsonl").read_text().splitlines() if line.strip()]
    return [Problem(id=f"mbpp/{r['task_id']}", prompt=r["text"], test_type="assert", tests=r["test_list"],
                    setup_code=r["test_setup_code"], reference=r["code"]) for r in rows]


@pytest.fixture(scope="module")
def expected_failures() -> dict[str, str]:
    return {f"mbpp/{k}": v for k, v in json.loads((MBPP_DIR / "reference_failures.json").read_text()).items()}


def _verdicts(results) -> list[tuple]:
    return [(r.status, r.tests_passed, r.tests_total, r.error_type,
             tuple((o["status"], o["error_type"], o["message"]) for o in r.test_outcomes)) for r in results]


def test_references_three_runs_and_two_executors_at_once(mbpp, expected_failures):
    items = [(p, p.reference) for p in mbpp]
    assert len(items) == 974
    with Executor(workers=2) as ex:
        first = ex.run_batch(items)
        failing = {p.id: r for p, r in zip(mbpp, first) if r.status != "pass"}
        assert sum(r.status == "pass" for r in first) == 971
        assert set(failing) == set(expected_failures)
        for pid, r in failing.items():
            assert r.status == "fail"
            assert r.error_type == expected_failures[pid]
            assert r.trace.startswith("assert ") and "expected" in r.trace and "got" in r.trace
        second = ex.run_batch(items)
        assert _verdicts(second) == _verdicts(first)

        # a third run on this executor while a second executor runs the same set
        with Executor(workers=2) as other:
            out: dict[str, list] = {}
            threads = [threading.Thread(target=lambda k=k, e=e: out.__setitem__(k, e.run_batch(items)))
                       for k, e in (("third", ex), ("other", other))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert _verdicts(out["third"]) == _verdicts(first)
        assert _verdicts(out["other"]) == _verdicts(first)
    passing = [r for r in first if r.status == "pass"]
    assert all(r.tests_passed == r.tests_total == 3 for r in passing)
    assert all(r.cpu_time_s > 0 and r.wall_time_s > 0 for r in first)
