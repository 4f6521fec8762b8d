# expect: fail timeout
# A return value of several megabytes (the reply for one candidate is capped). Building and
# sending it takes about the test's 0.5 s CPU-time limit in the program's processes: on a slower
# or busy machine the verdict is that limit's, never a pass.
def add(a, b):
    return list(range(1 << 20))
