"""Did every host's ranks run with the measurement environment the run recorded? Judged from coll_perf's
`manifest.env_by_host` ({host: {NAME: value or null}}, schema 1.4: what each host's lowest rank read from its
own process environment) and `manifest.env_rank_disagreements`, against the run manifest's `env` (the
allowlisted environment where cclbench ran, the head) plus the point's own variables (its -x NAME=VALUE).

Returns plain data: {"code", "where", "host", "variable", ...} per finding; render/anomalies.py puts it into
words. Per-node geometry (base/environment.PER_NODE_NAMES: CUDA_VISIBLE_DEVICES, NCCL_HOSTID) is never
compared: a launcher or an allocation sets it per node or per rank on purpose.
"""

from ..base.environment import EXPORT_PREFIXES, PER_NODE_NAMES

# A host whose value of a measurement variable differs from the run's record ("manifest") or, for a name
# the record does not hold, from the other hosts ("hosts").
ENV_HOST_DIFFERS = "env.host_differs"
# The ranks of one host disagree on a measurement variable (a wrapper, a per-rank profile).
ENV_RANK_DIFFERS = "env.rank_differs"


def _compared(name):
    return name.startswith(EXPORT_PREFIXES) and name not in PER_NODE_NAMES


def expected_env(head_env, point_env):
    """What every rank of a point should have run with: the head's measurement variables, then the point's."""
    expected = {name: value for name, value in (head_env or {}).items() if _compared(name)}
    expected.update({name: value for name, value in (point_env or {}).items() if _compared(name)})
    return expected


def _reference(values, host_order):
    """The value most hosts have; a tie goes to the value of the first host in host_order (the head)."""
    counts = {}
    for value in values.values():
        counts[value] = counts.get(value, 0) + 1
    best = max(counts.values())
    for host in host_order:
        if host in values and counts[values[host]] == best:
            return values[host]
    return next(value for value, count in counts.items() if count == best)


def point_env_findings(point, env_by_host, head_env, point_env, host_order=()):
    """Findings of one point: [(host, variable, value, expected, against)], value/expected None when unset."""
    if not isinstance(env_by_host, dict) or not env_by_host:
        return []
    hosts = [host for host in host_order if host in env_by_host] + sorted(h for h in env_by_host if h not in host_order)
    expected = expected_env(head_env, point_env)
    found = []
    for host in hosts:
        seen = env_by_host.get(host) if isinstance(env_by_host.get(host), dict) else {}
        for name, value in sorted(expected.items()):
            if seen.get(name) != value:
                found.append((host, name, seen.get(name), value, "manifest"))
    names = sorted({name for host in hosts if isinstance(env_by_host.get(host), dict)
                    for name in env_by_host[host] if _compared(name) and name not in expected})
    for name in names:
        values = {host: (env_by_host.get(host) or {}).get(name) for host in hosts}
        if len(set(values.values())) <= 1:
            continue
        reference = _reference(values, hosts)
        for host in hosts:
            if values[host] != reference:
                found.append((host, name, values[host], reference, "hosts"))
    return found


def env_anomalies(points, head_env, host_order=()):
    """points: [(point name, point env, env_by_host or None, env_rank_disagreements or None)] in plan order.
    One ENV_HOST_DIFFERS finding per (host, variable, value, expected, against) with the points it holds for
    (`where` is the first), and one ENV_RANK_DIFFERS finding per point, host and variable."""
    grouped, order, rank_findings = {}, [], []
    for point, point_env, env_by_host, disagreements in points:
        for finding in point_env_findings(point, env_by_host, head_env, point_env, host_order):
            if finding not in grouped:
                grouped[finding] = []
                order.append(finding)
            grouped[finding].append(point)
        for item in disagreements or []:
            if isinstance(item, dict) and _compared(str(item.get("variable", ""))):
                rank_findings.append({"code": ENV_RANK_DIFFERS, "where": point, "host": item.get("host"),
                                      "variable": item.get("variable"),
                                      "ranks": [(r.get("rank"), r.get("value")) for r in item.get("ranks") or []
                                                if isinstance(r, dict)]})
    found = []
    for finding in order:
        host, name, value, expected, against = finding
        points_held = grouped[finding]
        found.append({"code": ENV_HOST_DIFFERS, "where": points_held[0], "points": points_held, "host": host,
                      "variable": name, "value": value, "expected": expected, "against": against})
    return found + rank_findings
