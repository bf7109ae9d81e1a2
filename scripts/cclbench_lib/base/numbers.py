"""Small numeric helpers used everywhere: the finite-number test, the median, the coefficient of variation."""

import math
import statistics


def is_finite(value):
    """A JSON number that is finite: not a bool, not NaN or Infinity, not an integer too large for a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # JSON integers have no size limit
        return False


def cv_pct(values):
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    if mean <= 0:
        return None
    return statistics.stdev(values) / mean * 100.0


def positive(value):
    return float(value) if is_finite(value) and value > 0 else None


def median(values):
    """The median of the numbers (any iterable), None for none."""
    values = sorted(values)
    if not values:
        return None
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
