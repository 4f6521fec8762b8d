# expect: error
import os


def add(a, b):
    os._exit(0)
