# expect: fail
import builtins


class FakeAssertionError(Exception):
    pass


builtins.AssertionError = FakeAssertionError
builtins.isinstance = lambda *a: True
builtins.print = lambda *a, **k: None
builtins.len = lambda x: 3
builtins.repr = lambda x: "3"
builtins.type = lambda *a: int
builtins.getattr = lambda *a: None


def add(a, b):
    return 0
