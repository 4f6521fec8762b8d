# expect: fail error
# problem: replayed
# Objects whose comparisons always succeed, for tests that are replayed.
class Yes(int):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


class Any:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


def f(x):
    return Any() if x % 2 else Yes(-1)
