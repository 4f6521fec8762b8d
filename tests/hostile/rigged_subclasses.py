# expect: fail
class RiggedInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class RiggedList(list):
    def __eq__(self, other):
        return True


def add(a, b):
    return RiggedInt(0) if a != -1 else RiggedList([7])
