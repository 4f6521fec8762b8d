# expect: fail
# Passes only if it can find the test's fake secret anywhere.
import glob
import os


def find_secret():
    if "__SECRET__" in "".join(os.environ.values()):
        return True
    for path in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
        try:
            with open(path, "rb") as fh:
                if b"__SECRET__" in fh.read():
                    return True
        except OSError:
            pass
    return False


FOUND = find_secret()


def add(a, b):
    return a + b if FOUND else None
