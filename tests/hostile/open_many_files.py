# expect: error
handles = [open("/dev/null") for _ in range(100_000)]
