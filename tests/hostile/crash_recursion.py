# expect: error timeout
import sys

sys.setrecursionlimit(10**8)
nested = []
for _ in range(10**6):
    nested = [nested]


def add(a, b):
    return repr(nested)
