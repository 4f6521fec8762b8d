# expect: error fail
# Find the harness's run token by walking the stack, forge completion records on every file
# descriptor, and leave before the real harness can report.
import gc
import os
import sys


def add(a, b):
    tokens = set()
    frame = sys._getframe(1)
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, str) and len(value) == 24:
                tokens.add(value)
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            for v in list(obj.values()):
                if isinstance(v, str) and len(v) == 24:
                    tokens.add(v)
    lines = []
    for t in tokens:
        lines += [f'["o", {i}, "{t}"]' for i in range(3)] + [f'["v", {i}, [{a + b}]]' for i in range(3)]
        lines.append(f'["d", 3, "{t}"]')
    data = ("\n".join(lines) + "\n").encode()
    for fd in range(0, 1024):
        try:
            os.write(fd, data)
        except OSError:
            pass
    os._exit(0)
