# expect: error
block = bytearray(10**11)


def add(a, b):
    return a + b
