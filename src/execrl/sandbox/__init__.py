"""A hardened executor for untrusted generated programs (annotation, evaluation, RL rewards).

    from execrl.sandbox import Executor, ExecutionLimits, ExecutionResult
    with Executor(workers=2, limits=ExecutionLimits(timeout_s=4)) as ex:
        result = ex.run(problem, code)

See ``docs/sandbox.md`` for the design and the threat model.
"""

from execrl.sandbox.annotate import annotate_candidates
from execrl.sandbox.executor import Executor, WorkerStartError
from execrl.sandbox.limits import ExecutionLimits
from execrl.sandbox.result import ExecutionResult

__all__ = ["Executor", "ExecutionLimits", "ExecutionResult", "WorkerStartError", "annotate_candidates"]
