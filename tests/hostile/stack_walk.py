# expect: fail error
# Walk up the stack and overwrite anything that looks like a harness result.
import sys


def add(a, b):
    frame = sys._getframe(1)
    while frame is not None:
        for name, value in list(frame.f_locals.items()):
            if isinstance(value, dict):
                for k in list(value):
                    if k in ("passed", "result", "status", "ok"):
                        value[k] = True
            if isinstance(value, list):
                value[:] = [True] * len(value)
        frame = frame.f_back
    return 0
