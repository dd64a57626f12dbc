"""Shared test helper: the floating-point reachable-output attack on numpy noise.

Mironov (2012); Jin et al. (2022): an attacker who knows the noise-free value
checks whether an output is one that ``value + noise`` can produce in float64.
"""

import math


def numpy_laplace_reachable(x, loc, b):
    """Whether ``x`` is an output of ``loc + Generator.laplace(0, b)`` (numpy's
    ``U >= 0.5: -b log(2 - U - U)`` else ``b log(U + U)``, ``U = k 2^-53``)."""
    noise = x - loc
    u = math.exp(noise / b) / 2 if noise < 0 else 1 - math.exp(-noise / b) / 2
    k0 = int(round(u * 2.0**53))
    for k in range(k0 - 4, k0 + 5):
        U = k * 2.0**-53
        if not 0 < U < 1:
            continue
        lap = -b * math.log(2.0 - U - U) if U >= 0.5 else b * math.log(U + U)
        if loc + (0.0 + lap) == x:
            return True
    return False
