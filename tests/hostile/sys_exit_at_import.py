# expect: error
import sys

sys.exit(0)
