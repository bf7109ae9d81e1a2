"""What the doctor already found that a launch would only rediscover, as data.

The rule: a launch across hosts whose path the doctor failed (its `path_mtu` check: a path MTU mismatch, or a
rail down or blocked between two hosts) is not run. Such a launch would hang until its bound (NCCL stalls on a
path MTU mismatch; the MPI backend's TCP traffic black-holes) and say nothing the doctor has not said. Every
launch over those hosts that may use the failed rail is left out: NCCL's bootstrap and socket transport and the
MPI backend's TCP transport use every interface they are given, whatever NCCL_IB_HCA binds, so only a point bound
to other rails alone still runs (rules/dead_paths.needed_rails says which rails a launch needs; where that cannot
be told, every rail). Launches on one host still run. `baseline --run-despite-doctor` runs them all anyway.
"""

from ..model.doctor_paths import path_mtu_ends

PATH_CHECK = "path_mtu"
# How many findings a reason quotes before it says how many more there are.
QUOTED_FINDINGS = 2


def _peer(subject):
    """'node5:eth0 -> node7:eth0' -> 'node7'."""
    _, _, right = str(subject).partition("-> ")
    return right.split(":", 1)[0] or None


def failed_paths(checks):
    """[{"hosts": (a, b), "netdevs": (a's, b's) or (), "subject", "detail"}] of the doctor's failed paths between
    two hosts."""
    paths = []
    for check in checks or []:
        if not isinstance(check, dict) or check.get("id") != PATH_CHECK or check.get("status") != "fail":
            continue
        peer = _peer(check.get("subject"))
        if check.get("host") and peer:
            ends = path_mtu_ends(check)
            paths.append({"hosts": (check["host"], peer), "subject": check.get("subject"),
                          "netdevs": (ends[1], ends[3]) if ends and ends[1] else (), "detail": check.get("detail")})
    return paths


def paths_crossed(hosts, paths):
    """The failed paths a launch over `hosts` would cross: both ends among its hosts."""
    hosts = set(hosts or [])
    if len(hosts) < 2:
        return []
    return [path for path in paths if set(path["hosts"]) <= hosts]


def quoted(lines):
    """The first QUOTED_FINDINGS lines joined, and how many more there are."""
    more = f" (and {len(lines) - QUOTED_FINDINGS} more)" if len(lines) > QUOTED_FINDINGS else ""
    return "; ".join(lines[:QUOTED_FINDINGS]) + more


def not_run_reason(crossed):
    """Why a launch was left out, in the doctor's words."""
    return ("not run: the doctor failed the path(s) this launch would cross, so it would only hang until its bound: "
            + quoted([f"path_mtu {path['subject']}: {path['detail']}" for path in crossed])
            + " (fix the path and resume, or pass --run-despite-doctor)")


def host_findings(checks, hosts):
    """The doctor's fail lines about `hosts` ('id subject: detail'), attached to a hung launch's reason: the
    failed paths between hosts first (what hangs a launch across them), each distinct line once."""
    hosts = set(hosts or [])
    paths, others = [], []
    for check in checks or []:
        if not isinstance(check, dict) or check.get("status") != "fail":
            continue
        is_path = check.get("id") == PATH_CHECK
        if check.get("host") in hosts or (is_path and _peer(check.get("subject")) in hosts):
            line = f"{check.get('id')} {check.get('subject')}: {check.get('detail')}"
            found = paths if is_path else others
            if line not in found:
                found.append(line)
    return paths + others
