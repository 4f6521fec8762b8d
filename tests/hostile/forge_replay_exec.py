# expect: fail error
# problem: replayed
# Replace the harness's exec (and eval) through the frames' builtins, so that the tests
# never run in the child; then the harness would only see the completion records.
import sys

frame = sys._getframe()
while frame is not None:
    for name in ("exec", "eval"):
        try:
            frame.f_builtins[name] = lambda *a, **k: None
        except Exception:
            pass
    frame = frame.f_back


def f(x):
    return 0
