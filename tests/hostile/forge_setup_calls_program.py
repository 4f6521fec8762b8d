# expect: fail error
# problem: setup_calls_program
# A setup function that calls the program and compares (`verify`) used to run in the child,
# where an always-equal object (or a patched builtin) decided it; now the judge replays it.
import builtins


class Same(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


builtins.all = lambda *a: True


def inc(x):
    return Same(0)
