"""The reward-hacking watch: held-out tests made from references, and tamper signals.

- :mod:`execrl.watch.plus_tests` makes held-out tests by mutating the visible tests' inputs
  and running the reference in the sandbox;
- :mod:`execrl.watch.tamper` reads a completion's syntax tree and its sandbox verdict for
  signs that it probes the judge.
"""
