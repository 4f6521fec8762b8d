# expect: fail
# problem: half
# A float is expected: an int too large for float() used to raise in the judge and end
# the whole batch.
def half(x):
    return 1 << 1100
