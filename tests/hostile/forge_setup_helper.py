# expect: fail error
# problem: setup_helper
# The setup code's helper (`check`, which sorts) runs in the judge, not with the
# candidate's patched builtins.
import builtins

builtins.sorted = lambda *a, **k: [1, 2, 3]
builtins.len = lambda *a: 3


def items():
    return [9]
