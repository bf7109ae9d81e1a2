"""The tails of Student's t and Fisher's F, standard library only: what the smoke's bands and its unstable finding
(rules/smoke_bands.py) need to turn a spread measured from a few runs into a band with a known false-alarm rate.

Both come from the regularized incomplete beta function I_x(a, b), evaluated by its continued fraction (modified
Lentz); quantiles by bisection on the distribution function."""

import math

_TINY = 1e-300
_EPS = 1e-15


def _beta_fraction(x, a, b):
    """The continued fraction of I_x(a, b) (converges fast for x < (a + 1) / (a + b + 2))."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            result *= c * d
        if abs(c * d - 1.0) < _EPS:
            break
    return result


def regularized_beta(x, a, b):
    """I_x(a, b) for 0 <= x <= 1, a, b > 0."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def t_upper_tail(t, dof):
    """P(T > t) for Student's t with dof degrees of freedom."""
    tail = 0.5 * regularized_beta(dof / (dof + t * t), dof / 2.0, 0.5)
    return tail if t >= 0 else 1.0 - tail


def f_upper_tail(f, dof1, dof2):
    """P(F > f) for Fisher's F with (dof1, dof2) degrees of freedom."""
    if f <= 0:
        return 1.0
    return regularized_beta(dof2 / (dof2 + dof1 * f), dof2 / 2.0, dof1 / 2.0)


def _bisect_upper(tail, alpha, high):
    """The x with tail(x) = alpha for a decreasing tail function, by bisection."""
    low = 0.0
    while tail(high) > alpha:
        low, high = high, high * 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if tail(middle) > alpha:
            low = middle
        else:
            high = middle
        if high - low <= 1e-12 * max(1.0, high):
            break
    return (low + high) / 2.0


def t_quantile_upper(alpha, dof):
    """The t with P(T > t) = alpha (0 < alpha < 0.5)."""
    if not 0 < alpha < 0.5 or dof <= 0:
        raise ValueError("t_quantile_upper: needs 0 < alpha < 0.5 and dof > 0")
    return _bisect_upper(lambda t: t_upper_tail(t, dof), alpha, 10.0)


def f_quantile_upper(alpha, dof1, dof2):
    """The f with P(F > f) = alpha (0 < alpha < 1)."""
    if not 0 < alpha < 1 or dof1 <= 0 or dof2 <= 0:
        raise ValueError("f_quantile_upper: needs 0 < alpha < 1 and positive degrees of freedom")
    return _bisect_upper(lambda f: f_upper_tail(f, dof1, dof2), alpha, 10.0)
