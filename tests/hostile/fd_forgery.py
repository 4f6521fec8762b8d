# expect: error
import os


def add(a, b):
    for fd in range(0, 1024):
        try:
            os.write(fd, b'["v", 0, [3]]\n["v", 1, [4]]\n["v", 2, [0]]\n["d", 3, ""]\n')
        except OSError:
            pass
    os._exit(0)
