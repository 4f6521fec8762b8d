# expect: fail
# A return value of several megabytes (the reply for one candidate is capped).
def add(a, b):
    return list(range(1 << 20))
