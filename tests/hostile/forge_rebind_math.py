# expect: fail error
# problem: area
# Rebinding `math` (and a comment that looks like a redefinition) must not move the
# comparison into the child either: math and cmath are the judge's own modules.
# isinstance = x; set = x; sorted = x
import builtins


class FakeMath:
    pi = 3.0

    @staticmethod
    def isclose(*args, **kwargs):
        return True


math = FakeMath()
builtins.isinstance = lambda *a: True


def area(r):
    return -1.0
