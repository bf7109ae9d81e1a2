"""The repeat rule over a run's records: when a case is host-bound, and the cases of each GPU-timed point as
rules/repeatability.judge_point takes them (that module holds the statistics, limits and codes)."""

from ..base.numbers import median, positive
from ..model.records import bandwidth_time_us, group_repeats, is_correctness_only, record_is_sound
from ..rules.repeatability import HOST_BOUND_GATE_FACTOR, MAD_TO_SIGMA, judge_point


# The repeat rule (docs/bring-up.md "The baseline"). A case's headline is the median over its
# repeats of the bandwidth time; its CV across repeats is the bring-up figure (target <= the gate): a case
# above it is a warning, and a point fails only when its spread is systematic (rules/repeatability.py).
#  - robust dispersion = 1.4826 x MAD / median (MAD = median absolute deviation from the median; one
#    repeat of three cannot move it, so a single off repeat leaves the median alone);
#  - host-bound cases (batch_time_us, the host's time per launch, >= HOST_BOUND_RATIO x the gated GPU
#    time: the GPU finishes before the host can launch the next one, so scheduling of the launching
#    thread shows) get HOST_BOUND_GATE_FACTOR x the gate for that robust dispersion.
HOST_BOUND_RATIO = 1.25
__all__ = ["HOST_BOUND_GATE_FACTOR", "HOST_BOUND_RATIO", "MAD_TO_SIGMA", "is_host_bound", "judge_repeatability",
           "point_cases"]


def is_host_bound(records):
    """GPU time below the host's launch interval, from the records' own two clocks; False when either
    is missing (no gated loop: nothing says the GPU outran the host)."""
    gated = median([t for t in (positive(r.get("gated_time_us")) for r in records) if t is not None])
    batch = median([t for t in (positive(r.get("batch_time_us")) for r in records) if t is not None])
    return gated is not None and batch is not None and batch >= HOST_BOUND_RATIO * gated


def point_cases(records):
    """{base point: (cases, repeats)} for rules/repeatability.judge_point: per GPU-timed case with a sound
    record, (times in the order of the point's repeats, None where a repeat has none, host-bound); repeats:
    the point names of the repeats, sorted. Emulated and MPI-backend records are correctness only: no case."""
    by_point = {}
    for (base, case_id), group in sorted(group_repeats(records).items()):
        sound = [r for r in group if record_is_sound(r) and not is_correctness_only(r)]
        times = {r["point"]: t for r, t in ((r, bandwidth_time_us(r)) for r in sound) if t is not None}
        if times:
            by_point.setdefault(base, {})[case_id] = (times, is_host_bound(sound))
    points = {}
    for base, by_case in by_point.items():
        repeats = sorted({name for times, _ in by_case.values() for name in times})
        points[base] = ({case_id: ([times.get(name) for name in repeats], host_bound)
                         for case_id, (times, host_bound) in by_case.items()}, repeats)
    return points


def judge_repeatability(records, gate_pct):
    """{base point: judge_point(...)} of every GPU-timed point with a case of two or more repeats: the run's
    repeatability gate (a point fails only when its spread is systematic; single cases warn)."""
    judged = {}
    for base, (cases, repeats) in sorted(point_cases(records).items()):
        verdict = judge_point(cases, gate_pct, repeats)
        if verdict is not None:
            judged[base] = verdict
    return judged
