"""Correct programs the sandbox once judged otherwise than plain ``python`` (issues #48, #47), one
per class, each judged both ways: the verdicts agree. They are in the differential corpus
(``tests/data/differential/features.py``) too, so the bench guards them; values beyond the
sandbox's size and depth limits give an error naming the limit, never a silent ``fail``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor
from execrl.sandbox.differential import compare, load_corpus

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

LIMITS = ExecutionLimits(timeout_s=5, memory_mb=1536)
FEATURES = Path(__file__).parent / "data" / "differential" / "features.py"
CLASSES = ["values/dict_keys_returned", "values/dict_items_returned", "values/ordered_dict_moved_to_end",
           "values/result_over_a_mebibyte", "values/generator_items_over_a_mebibyte", "values/argument_nested_130_deep",
           "values/argument_kept_by_the_program", "stdio/fork_then_exit_in_the_child",
           # values keep their type's behaviour
           "values/namedtuple_keeps_its_text_and_name", "values/int_enum_member_text", "values/str_subclass_str",
           "values/dict_subclass_missing_key", "values/format_without_spec", "values/date_argument",
           "values/numpy_array_against_a_list", "stdio/output_of_a_finalizer_at_exit",
           "exceptions/frozen_dataclass_error_by_name", "values/array_returned",
           # attributes of the program's objects named as the judge's handles' own (``_buf``, ``_op``)
           "values/program_attributes_named_as_the_judges_own",
           # the interpreter's finalization of ``__main__``: a collection with every global still bound
           "stdio/finalizers_at_exit_read_globals", "stdio/finalizers_at_exit_of_objects_in_cycles",
           "stdio/finalizer_after_exit_zero_and_atexit", "stdio/weakref_callback_not_run_at_exit",
           # values of the standard library a test passes, and what the program's objects say of themselves
           "values/tz_aware_datetime_and_slice_arguments", "values/decimal_and_fraction_arguments",
           "values/standard_library_objects_the_test_passes", "values/private_attribute_of_a_test_object",
           "values/docstring_and_module_of_a_wrapped_function", "values/decorator_of_a_test_function",
           "values/program_reads_its_own_source",
           "values/context_manager_suppresses_the_tests_own_exception",
           # threads of a test calling the program at once; recursion through both processes
           "threads/test_threads_call_the_program_at_once", "threads/test_threads_share_a_program_object",
           "recursion/test_function_memoized_by_the_program", "recursion/test_and_program_calling_each_other_450_deep",
           "stdio/closed_stdout_is_not_flushed_at_exit",
           # the program's exceptions as the test reads them
           "exceptions/own_str_of_the_programs_exception", "exceptions/arguments_and_attributes_that_are_containers",
           "exceptions/class_with_two_builtin_bases", "exceptions/unicode_decode_error_caught_by_test",
           "generators/return_value_of_the_programs_generator",
           # the script's directory first on sys.path
           "files/program_imports_a_module_it_wrote", "stdio/program_imports_a_module_it_wrote",
           # a review of those fixes
           "generators/return_value_that_is_a_container", "generators/exception_with_container_arguments_from_a_generator",
           "exceptions/long_text_of_the_programs_exception", "exceptions/large_arguments_the_test_never_reads",
           "exceptions/class_with_five_builtin_bases", "threads/test_callback_hands_work_to_a_pool",
           "recursion/through_both_processes_under_the_programs_own_limit",
           # a tenth probe
           "judge/key_function_called_with_builtin_classes", "judge/a_numpy_module_the_judge_has_not_imported",
           "judge/test_callbacks_change_the_programs_list", "judge/test_visitor_fills_the_programs_dict",
           "judge/test_callback_changes_then_raises", "judge/deep_copy_of_a_tests_list", "judge/copy_of_a_tests_node",
           # a review of those fixes
           "judge/type_crosses_both_ways", "judge/tee_of_a_tests_iterators", "judge/copy_of_a_tests_iterator_read_ahead",
           "judge/test_callbacks_change_the_programs_list_subclass", "judge/test_visitor_fills_the_programs_dict_subclass",
           # a second review
           "judge/test_hook_on_the_programs_list_subclass_it_keeps_changing", "judge/deep_copy_of_a_tests_iterator_read_ahead",
           "judge/callable_object_of_the_tests_without_a_hash"]
WRONG = ["stdio/flush_of_a_closed_stdout_fails_at_exit", "stdio/stream_whose_flush_raises_at_exit",
         "exceptions/class_claiming_to_be_a_builtin", "recursion/endless_recursion_through_both_processes",
         "generators/return_value_whose_text_is_the_expected_one", "exceptions/subclass_of_system_exit_ends_the_tests",
         "exceptions/class_with_a_name_type_refuses", "judge/type_through_a_tests_key_function",
         "judge/reads_the_tests_through_a_class_it_made", "judge/metaclass_a_tests_function_returns"]
"""Programs plain Python does not pass that the sandbox once passed (or passed a test of)."""


@pytest.fixture(scope="module")
def ex():
    with Executor(workers=1, limits=LIMITS) as executor:
        yield executor


@pytest.fixture(scope="module")
def corpus():
    return {p.id.removeprefix("feature/"): p for p in load_corpus(FEATURES, builtin=(), humaneval=False,
                                                                  mutants_per_program=0)}


@pytest.mark.parametrize("name", CLASSES)
def test_the_sandbox_judges_as_plain_python(ex, corpus, name):
    (outcome,) = compare([corpus[name]], ex, LIMITS, workers=1).outcomes
    assert outcome.plain.status == "pass", outcome.plain
    assert outcome.agree, (outcome.plain, outcome.sandbox)


@pytest.mark.parametrize("name", WRONG)
def test_the_sandbox_fails_what_plain_python_fails(ex, corpus, name):
    (outcome,) = compare([corpus[name]], ex, LIMITS, workers=1).outcomes
    assert outcome.plain.status != "pass", outcome.plain
    assert outcome.agree, (outcome.plain, outcome.sandbox)


def _judge(ex, code, tests):
    return ex.run(Problem(id="p", prompt="t", test_type="assert", tests=tests), code)


def test_a_result_over_the_size_limit_is_an_error_naming_it(ex):
    r = _judge(ex, "def big(n):\n    return list(range(n))\n",
               ["assert big(5_000_000) == list(range(5_000_000))", "assert len(big(5_000_000)) == 5_000_000"])
    assert [(o["status"], o["error_type"]) for o in r.test_outcomes] == [("error", "ValueTooLarge"), ("pass", None)]
    assert "32 MiB" in r.error_message


def test_values_beyond_the_depth_limit_are_errors_naming_it(ex):
    nest = "def nest(n):\n    x = []\n    for _ in range(n):\n        x = [x]\n    return x\n"
    build = "y = []\nfor _ in range(400):\n    y = [y]\n"
    result = _judge(ex, nest, [build + "assert nest(400) == y", "assert nest(3) == [[[[]]]]"])
    argument = _judge(ex, nest + "def depth(x):\n    return 1 + depth(x[0]) if x else 0\n",
                      [build + "assert depth(y) == 400"])
    assert [(o["status"], o["error_type"]) for o in result.test_outcomes] == [("error", "ValueTooDeep"), ("pass", None)]
    assert [(o["status"], o["error_type"]) for o in argument.test_outcomes] == [("error", "ValueTooDeep")]
    assert "300 levels" in result.error_message and "the test's list" in argument.error_message


def test_a_test_subclassing_the_programs_class_errs_saying_why(ex, corpus):
    """A stated difference (``INTENDED``): the error names the limit, not the judge's internals."""
    program = corpus["values/test_subclasses_a_program_class"]
    (outcome,) = compare([program], ex, LIMITS, workers=1).outcomes
    assert outcome.explained_by == "test_subclasses_a_program_class"
    r = ex.run(program.problem, program.code)
    assert (r.status, r.error_type) == ("error", "TypeError")
    assert r.error_message.startswith("a test cannot subclass the program's class Greeter"), r.error_message
