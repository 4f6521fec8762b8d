# expect: fail
# Leaves files where a later candidate could find them (see leak_reader.py).
import os

for d in ("/tmp", "/dev/shm", os.getcwd(), os.path.expanduser("~")):
    try:
        with open(os.path.join(d, "execrl-leak"), "w") as fh:
            fh.write("answers")
    except OSError:
        pass


def add(a, b):
    return 0
