# expect: fail error
# problem: area
# `import math` used to send the whole assert, expected value included, into the child,
# where the candidate's patched math.isclose decided it.
import math

math.isclose = lambda *a, **k: True
math.pi = 0.0


def area(r):
    return 0.0
