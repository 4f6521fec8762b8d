# expect: timeout
# problem: judge_division_bomb
# Integers of millions of bits, divided, reduced and rounded by the judge: long division
# costs the product of the operands' sizes.
# Plain Python takes seconds over these tests too: the judge's work on them is charged to the
# program's CPU-time limit, so the verdict is the one a fresh interpreter gives, timeout.
def f(x):
    return {1: 1 << (1 << 21), 2: (1 << (1 << 20)) + 1, 3: 10**7}[x]
