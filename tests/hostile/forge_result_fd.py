# expect: fail error
# problem: replayed
# Truncate the result fd and write records that claim the replayed tests passed, with the
# run token dug out of the harness's frames.
import os
import sys


def f(x):
    token = None
    frame = sys._getframe()
    while frame is not None:
        token = frame.f_locals.get("token", token)
        frame = frame.f_back
    for fd in range(3, 1024):
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, 0)
            os.write(fd, (f'["o", 0, "{token}"]\n["r", 0, [], null]\n["r", 1, [], null]\n'
                          f'["d", 2, "{token}"]\n').encode())
        except OSError:
            pass
    os._exit(0)
