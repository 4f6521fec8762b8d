# expect: fail error
# problem: setup_module
# A module the setup code imports (here numpy) is the judge's: the program patching its own
# copy of np.allclose must not decide the comparison (the expected list stays outside).
import numpy as np

np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None


def pair():
    return [0.0]
