# expect: fail error
import atexit
import os
import sys

atexit.register(lambda: os._exit(0))
sys.exitfunc = lambda: os._exit(0)


def add(a, b):
    return 0
