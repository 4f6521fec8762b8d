# expect: error fail
# problem: judge_bomb
# Values that make the judge's own evaluation of the test expensive.
def f(x):
    return 3 * 10**8 if x == 3 else 10**9
