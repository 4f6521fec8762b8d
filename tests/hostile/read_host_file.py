# expect: fail
# Passes only if it can read a host file (e.g. a problems file with expected outputs).
def add(a, b):
    try:
        with open("__SENTINEL__") as fh:
            fh.read()
        return a + b
    except OSError:
        return None
