"""The repeat rule: when a case's repeats agree (CV below the gate, else a stable median by the robust
dispersion, MAD x MAD_TO_SIGMA), and when a case is host-bound."""

from ..base.numbers import cv_pct, median, positive
from ..model.records import bandwidth_time_us, group_repeats, is_correctness_only, record_is_sound


# The repeat rule (README "Baseline, report and compare"). A case's headline is the median over its
# repeats of the bandwidth time; its CV across repeats is the bring-up figure (target <= the gate).
# A CV above the gate fails the case only when the median itself is not reproducible:
#  - robust dispersion = 1.4826 x MAD / median (MAD = median absolute deviation from the median; one
#    repeat of three cannot move it, so a single off repeat leaves the median, and the verdict, alone);
#  - host-bound cases (batch_time_us, the host's time per launch, >= HOST_BOUND_RATIO x the gated GPU
#    time: the GPU finishes before the host can launch the next one, so scheduling of the launching
#    thread shows) get HOST_BOUND_GATE_FACTOR x the gate for that robust dispersion.
HOST_BOUND_RATIO = 1.25
HOST_BOUND_GATE_FACTOR = 3.0
MAD_TO_SIGMA = 1.4826


def is_host_bound(records):
    """GPU time below the host's launch interval, from the records' own two clocks; False when either
    is missing (no gated loop: nothing says the GPU outran the host)."""
    gated = median([t for t in (positive(r.get("gated_time_us")) for r in records) if t is not None])
    batch = median([t for t in (positive(r.get("batch_time_us")) for r in records) if t is not None])
    return gated is not None and batch is not None and batch >= HOST_BOUND_RATIO * gated


def repeat_failures(records, gate_pct):
    """[(base point, case_id, verdict)] of every case whose repeats fail the repeat rule, in that order.
    Emulated and MPI-backend records have no verdict (repeat_verdict returns None) and never fail."""
    failures = []
    for (base, case_id), group in sorted(group_repeats(records).items()):
        verdict = repeat_verdict(group, gate_pct)
        if verdict is not None and not verdict["passed"]:
            failures.append((base, case_id, verdict))
    return failures


def repeat_verdict(records_of_case, gate_pct):
    """The repeat rule for one case: None with fewer than 2 sound, GPU-timed repeats; else a dict with
    repeats, headline_us, cv_pct, robust_pct, host_bound, verdict ('ok', 'one repeat off',
    'host-bound', 'FAIL') and passed."""
    sound = [r for r in records_of_case if record_is_sound(r) and not is_correctness_only(r)]
    times = [t for t in (bandwidth_time_us(r) for r in sound) if t is not None]
    if len(times) < 2:
        return None
    middle = median(times)
    cv = cv_pct(times)
    robust = MAD_TO_SIGMA * median([abs(t - middle) for t in times]) / middle * 100.0
    host_bound = is_host_bound(sound)
    limit = gate_pct * (HOST_BOUND_GATE_FACTOR if host_bound else 1.0)
    if cv <= gate_pct:
        verdict = "ok"
    elif robust <= limit:
        verdict = "host-bound" if host_bound else "one repeat off"
    else:
        verdict = "FAIL"
    return {"repeats": len(times), "headline_us": middle, "cv_pct": cv, "robust_pct": robust,
            "host_bound": host_bound, "limit_pct": limit, "verdict": verdict, "passed": verdict != "FAIL"}
