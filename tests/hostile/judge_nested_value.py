# expect: error fail
# A return value built to break the judge's decoding and comparison: deeply nested, with
# NaNs and huge integers.
def add(a, b):
    v = [float("nan"), 1 << 5000]
    for _ in range(200):
        v = [v]
    return v
