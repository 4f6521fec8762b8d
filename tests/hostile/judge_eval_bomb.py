# expect: timeout
# problem: judge_bomb
# Values that make the judge's own evaluation of the test expensive (seconds in plain Python
# too): charged to the program's CPU-time limit, the verdict is timeout.
def f(x):
    return 3 * 10**8 if x == 3 else 10**9
