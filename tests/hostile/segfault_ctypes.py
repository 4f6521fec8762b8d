# expect: error
import ctypes


def add(a, b):
    return ctypes.string_at(0)
