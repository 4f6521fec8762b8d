# expect: error
# problem: echo
# Print the right answer, then exit with a code that equals 0 but is not an int: `python`
# prints it and exits with status 1.
print(input())
raise SystemExit(0.0)
