# expect: timeout
import time


def add(a, b):
    time.sleep(10_000)
