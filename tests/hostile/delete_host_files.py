# expect: fail
# Try to delete, overwrite or plant files outside the temp dir, including a sitecustomize.py
# that would poison every later interpreter started from this environment.
import os
import shutil
import sys

TARGETS = ["__SENTINEL__", os.path.dirname("__SENTINEL__")]
damage = 0
for path in TARGETS:
    for attempt in (os.remove, shutil.rmtree, lambda p: open(p, "w").write("pwned")):
        try:
            attempt(path)
            damage += 1
        except Exception:
            pass
for d in list(sys.path) + [sys.prefix, sys.base_prefix, "/etc", "/usr/lib", "/work", "/root", "/"]:
    try:
        with open(os.path.join(d or ".", "sitecustomize.py"), "w") as fh:
            fh.write("import os; os._exit(0)\n")
        damage += 1
    except Exception:
        pass


def add(a, b):
    return -damage - 1000
