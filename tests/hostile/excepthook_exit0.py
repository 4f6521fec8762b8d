# expect: error
import os
import sys
import threading

sys.excepthook = lambda *exc: os._exit(0)
threading.excepthook = lambda *exc: os._exit(0)


def add(a, b):
    raise ValueError("wrong")
