# expect: error fail
# problem: judge_division_bomb
# Integers of millions of bits, divided, reduced and rounded by the judge: long division
# costs the product of the operands' sizes.
def f(x):
    return {1: 1 << (1 << 21), 2: (1 << (1 << 20)) + 1, 3: 10**7}[x]
