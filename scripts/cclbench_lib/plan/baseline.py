"""The baseline plan: every launch, as an exact argument list, decided before anything runs.

A plan is pure data computed from its inputs (hosts, GPUs per node, HCAs, sizes...), so `plan`
prints exactly what `baseline` runs, and `baseline --resume` recomputes the same launches from the
inputs stored in run_manifest.json.
"""

import os
import shlex

from ..base.values import KNOWN_COLLECTIVES, format_size, sweep_sizes
from ..model import launcher
from ..model.records import CASES_FILE
from ..plan.bounds import launch_bounds, with_watchdog
from ..plan.decode import AB_MPI_NOTE, PRODUCTION_NOTE, ab_points, decode_points
from ..plan.doctor_point import cclbench_script, doctor_argv
from ..plan.smoke_cases import smoke_reference_launches


# The gate of every multi-node point: inter-node traffic must be NET/IB (the RDMA rails), never a
# silent NET/Socket fallback. Add GDRDMA or intra=P2P with --expect-transport when wanted.
DEFAULT_EXPECT = "inter=NET/IB"
# coll_perf flags the planner uses when present; builds that predate them get the older equivalents.
# When coll_perf is not built (plan only), the newest set is assumed.
NEWEST_COLL_PERF_FLAGS = ["--expect-transport", "--learn-deadlines", "--log-dir", "--nccl-log-dir", "--progress",
                          "--share-gpu", "--sysfs-root", "--tuning-from", "--tuning-probe"]
# Sanity pass: about three sizes spanning the sweep, all_reduce only, few iterations, so environment or
# unit mistakes show up in minutes, not after the full matrix.
SANITY_ITERATIONS = 5
EMULATED_RANKS = 4
MPI_BACKEND_RANKS = 4
# The one-GPU correctness point (4 emulated ranks over NET/Socket on loopback): 8K, 128K and 2M fall
# on both sides of NCCL's LL -> LL128/Simple switches; 2 timed iterations (their times mean nothing),
# one warm-up, every result checked. Seconds, not minutes.
EMULATED_CHECK_SIZES = (8 << 10, 2 << 20, 16)
EMULATED_CHECK_ITERATIONS = 2
EMULATED_CHECK_WARMUP = 1
# The MPI backend on host memory (no GPU) is correctness only as well: every case of the sweep is still checked
# (-c 1), but 2 timed iterations and 1 warm-up instead of -n/-w (20 and 5 by default), whose times mean nothing
# there; its sanity pass likewise. 26 collective calls per case made the GPU-less default baseline minutes long.
MPI_CHECK_ITERATIONS = 2
MPI_CHECK_WARMUP = 1
ONE_GPU_NOTE = ("one GPU: the collectives run as one real rank on it (GPU times with no peer); "
                f"{EMULATED_RANKS} emulated ranks (--share-gpu) check the multi-rank code paths, correctness only")
# GPU-less hosts (no GPU found and no --gpus-per-node): the MPI backend, this many ranks per host.
MPI_RANKS_PER_HOST = 2
CLUSTER_MPI_NOTE = ("no GPU on the hosts: the MPI backend runs the collectives on host memory across the hosts "
                    "(its TCP traffic goes where --mpirun-args sends it, e.g. --mca btl_tcp_if_include SUBNETS); "
                    "correctness only, these are not GPU or NCCL figures")
CLUSTER_MPI_SKIPPED_NOTE = "--decode and --ab need NCCL: not planned on GPU-less hosts (the MPI backend)"
EMULATED_NOTE = (f"{EMULATED_RANKS} emulated ranks share one GPU (--share-gpu, NET/Socket on loopback): "
                 "correctness only, timings are not performance figures")


def hca_label(binding, all_hcas):
    """Point-name fragment for an NCCL_IB_HCA binding: 'rails-both'/'rails-all' or 'rail-mlx5_0'."""
    if len(binding) > 1:
        return "rails-both" if len(binding) == 2 else "rails-all"
    name, port = binding[0].split(":")
    same_name = [hca for hca in all_hcas if hca.split(":")[0] == name]
    return f"rail-{name}" if len(same_name) == 1 else f"rail-{name}-p{port}"


def inter_bindings(hcas, netdevs, cross_nic):
    """The inter-node sweep as [(point name fragment, env)]: every rail together once per NCCL_CROSS_NIC value, then
    each rail alone once. NCCL_CROSS_NIC chooses between a node's NICs, so with one NIC a node it changes nothing:
    a single-rail point runs once, without it. The rails: the RDMA ports (NCCL_IB_HCA), else with --netdevs of two
    interfaces or more the interfaces NCCL's sockets use (NCCL_SOCKET_IFNAME, '=' for the exact name)."""
    sweep = []
    for value in cross_nic:
        env = {"NCCL_CROSS_NIC": str(value)}
        name = f"cross{value}"
        if hcas:
            name += "." + hca_label(list(hcas), hcas)
            env["NCCL_IB_HCA"] = "=" + ",".join(hcas)
        sweep.append((name, env))
    if len(hcas) > 1:
        sweep += [(hca_label([hca], hcas), {"NCCL_IB_HCA": "=" + hca}) for hca in hcas]
    elif not hcas and len(netdevs or []) > 1:
        sweep += [(f"rail-{netdev}", {"NCCL_SOCKET_IFNAME": "=" + netdev}) for netdev in netdevs]
    return sweep


def tcp_rail_args(mpirun_args, netdev):
    """The launcher arguments of an MPI-backend point over one interface: the user's own arguments without any TCP
    BTL interface list (btl_tcp_if_include and btl_tcp_if_exclude cannot both be set), then
    --mca btl_tcp_if_include NETDEV."""
    args, index = [], 0
    mpirun_args = list(mpirun_args or [])
    while index < len(mpirun_args):
        item = mpirun_args[index]
        if item in ("--mca", "-mca") and index + 2 < len(mpirun_args) and \
                mpirun_args[index + 1] in ("btl_tcp_if_include", "btl_tcp_if_exclude"):
            index += 3
            continue
        args.append(item)
        index += 1
    return args + ["--mca", "btl_tcp_if_include", netdev]


def intra_expectation(spec):
    """The intra-node part of a transport expectation (for single-node points)."""
    if not spec:
        return ""
    return ",".join(part for part in spec.split(",") if part.strip().startswith("intra="))


class Planner:
    """Builds launches from plan inputs (a plain dict, stored in the manifest)."""

    def __init__(self, inputs, run_dir):
        self.inputs = inputs
        self.run_dir = os.path.abspath(run_dir)

    # -- helpers ---------------------------------------------------------------------------------
    def path(self, *parts):
        return os.path.join(self.run_dir, *parts)

    def tool(self, name):
        return os.path.join(self.inputs["bin_dir"], name)

    def mpirun(self, nranks, host_spec=None, env=None, oversubscribe=False):
        """The launcher's argv prefix (mpirun, or srun in a Slurm allocation: launcher.py)."""
        return launcher.command(self.inputs, nranks, host_spec, env, oversubscribe)

    def has_flag(self, flag):
        flags = self.inputs.get("coll_perf_flags")
        return flag in (NEWEST_COLL_PERF_FLAGS if flags is None else flags)

    def coll_args(self, point, sizes=None, collectives=None, iterations=None, jsonl=CASES_FILE,
                  expect="", tuning_from=None, warmup=None, size_args=None):
        inputs = self.inputs
        min_b, max_b, factor = sizes or (inputs["min_bytes"], inputs["max_bytes"], inputs["step_factor"])
        argv = [self.tool("coll_perf")] + (list(size_args) if size_args else
                                            ["-b", format_size(min_b), "-e", format_size(max_b), "-f", str(factor)])
        argv += ["-n", str(iterations or inputs["iterations"]), "-w", str(inputs["warmup"] if warmup is None else warmup), "-c", "1",
                "--coll", ",".join(collectives or inputs["collectives"])]
        if inputs.get("timeout_s"):
            argv += ["-T", str(inputs["timeout_s"])]
        argv += self.watch_flags()
        log_flag = "--nccl-log-dir" if self.has_flag("--nccl-log-dir") else "--log-dir"
        argv += ["--point", point, "--jsonl", self.path(jsonl), log_flag, self.path("nccl", point),
                 "-J", self.path("raw", point + ".json")]
        if expect:
            argv += ["--expect-transport", expect]
        if inputs.get("sysfs_root") and self.has_flag("--sysfs-root"):
            argv += ["--sysfs-root", inputs["sysfs_root"]]
        if inputs.get("netdevs"):
            argv += ["--netdevs", ",".join(inputs["netdevs"])]
        if tuning_from:
            argv += ["--tuning-from", tuning_from]
        return argv

    def watch_flags(self):
        """coll_perf's learned deadlines and its progress reports to the runner (plan/bounds.py), where the build
        has them: -T, the plan's worst case or --timeout, is then their ceiling."""
        return [flag for flag in ("--learn-deadlines", "--progress") if self.has_flag(flag)]

    def tuning_enabled(self, nccl):
        """Algorithm/protocol per size come from a separate untimed probe launch (coll_perf --tuning-probe,
        NCCL TUNING logging), attached to the timed run's records with --tuning-from: timed iterations are
        never instrumented. Not for the MPI backend (no NCCL) nor the sanity pass (it stays quick)."""
        return (nccl and self.inputs.get("tuning_probe", True) and self.has_flag("--tuning-probe")
                and self.has_flag("--tuning-from"))

    def probe_launch(self, base, mpirun_argv, nranks, hosts, env, extra, size_args=None, collectives=None):
        """The untimed probe of a point: same ranks, environment and cases as the point; no records.
        A CUDA-graph point's probe runs eager (-G dropped): it only logs NCCL's choice per case."""
        inputs = self.inputs
        out = self.path("tuning", base + ".json")
        extra = list(extra)
        if "-G" in extra:
            del extra[extra.index("-G"):extra.index("-G") + 2]
        argv = mpirun_argv + [self.tool("coll_perf")] + (list(size_args) if size_args else [
            "-b", format_size(inputs["min_bytes"]), "-e", format_size(inputs["max_bytes"]), "-f",
            str(inputs["step_factor"])]) + ["--coll", ",".join(collectives or inputs["collectives"])]
        if inputs.get("timeout_s"):
            argv += ["-T", str(inputs["timeout_s"])]
        argv += self.watch_flags()
        argv += ["--point", base, "--nccl-log-dir" if self.has_flag("--nccl-log-dir") else "--log-dir",
                 self.path("nccl", base + ".tuning-probe"), "--tuning-probe", out] + list(extra)
        return self.launch(f"tuning.{base}", "tuning", argv, nranks, hosts, env, outputs=[out])

    def told_backend(self, argv):
        """A plan that expects GPUs tells coll_perf so (--backend nccl): a launch planned for NCCL where CUDA sees no
        device fails with coll_perf's reason instead of falling back to host memory under its name. A launch that
        names its backend (--backend mpi) keeps it; coll_perf run by hand keeps its own automatic choice."""
        tool = self.tool("coll_perf")
        if not self.inputs.get("gpus_per_node") or tool not in argv or "--backend" in argv:
            return argv
        at = argv.index(tool) + 1
        return argv[:at] + ["--backend", "nccl"] + argv[at:]

    def launch(self, name, kind, argv, nranks=1, hosts=None, env=None, base_point=None, repeat=None,
               sizes=None, collectives=None, outputs=None, mode_note=None, tuning_from=None):
        argv = self.told_backend(argv)
        # Nothing hangs by default (plan/bounds.py): coll_perf's watchdog -T and the runner's bound on the whole
        # launch come from the command itself; --timeout / --launch-timeout override them.
        bounds = launch_bounds(kind, argv, nranks)
        if self.inputs.get("launch_timeout_s"):
            bounds["bound_s"] = self.inputs["launch_timeout_s"]
        entry = {"name": name, "kind": kind, "argv": with_watchdog(argv, bounds["watchdog_s"]), "nranks": nranks,
                 "hosts": hosts or [], "env": env or {}, "outputs": outputs or [], "bound_s": bounds["bound_s"]}
        if bounds["watchdog_s"] is not None:
            entry["watchdog_s"] = bounds["watchdog_s"]
        if kind in ("sanity", "intra", "inter", "local"):
            entry["base_point"] = base_point or name
            entry["repeat"] = repeat or 1
            entry["collectives"] = collectives or self.inputs["collectives"]
            entry["sizes"] = sizes if sizes is not None else sweep_sizes(
                self.inputs["min_bytes"], self.inputs["max_bytes"], self.inputs["step_factor"])
        if mode_note:
            entry["note"] = mode_note
        if tuning_from:
            entry["tuning_from"] = tuning_from
        return entry

    def _interleaved(self, points, tuning):
        """Every point's repeats, interleaved: rep1 of every point, then rep2 of every point, ... so that
        drift over the run (clocks, temperature, other jobs) hits all points alike instead of one. A
        point's untimed TUNING probe runs right before its first repeat."""
        launches = []
        repeats = self.inputs["repeat"]
        for k in range(1, repeats + 1):
            for point in points:
                base = point["base"]
                if point.get("once") and k > 1:
                    continue  # a correctness check: its times judge nothing, one run is enough
                probe = self.path("tuning", base + ".json") if tuning else None
                if probe and k == 1:
                    launches.append(self.probe_launch(base, point["mpirun"], point["nranks"], point["hosts"],
                                                      point["env"], point.get("extra", []), point.get("size_args"),
                                                      point.get("collectives")))
                    if point.get("ab"):
                        launches[-1]["ab"] = point["ab"]  # NCCL refusing the variant fails its probe too: a finding
                    if point.get("binding"):
                        launches[-1]["binding"] = dict(point["binding"])  # probed with the binding it runs with
                name = base if repeats == 1 or point.get("once") else f"{base}.rep{k}"
                argv = point["mpirun"] + self.coll_args(name, expect=point["expect"], tuning_from=probe,
                                                        collectives=point.get("collectives"),
                                                        iterations=point.get("iterations"), warmup=point.get("warmup"),
                                                        size_args=point.get("size_args")) + point.get("extra", [])
                entry = self.launch(name, point["kind"], argv, point["nranks"], point["hosts"], point["env"],
                                    base_point=base, repeat=k, mode_note=point.get("note"), tuning_from=probe,
                                    sizes=point.get("sizes"), collectives=point.get("collectives"))
                for key in ("decode", "ab", "binding"):
                    if point.get(key):
                        entry[key] = dict(point[key])
                launches.append(entry)
        return launches

    # -- the plan ----------------------------------------------------------------------------------
    def build(self):
        hosts = self.inputs["hosts"]
        if hosts:
            return self._cluster_plan(hosts)
        return self._local_plan()

    def _sanity_sizes(self):
        """About three sizes across the user's range: -b, the geometric middle, near -e (8K..64M
        gives 8K, 512K, 32M)."""
        min_b, max_b = self.inputs["min_bytes"], self.inputs["max_bytes"]
        octaves = max(0, (max_b // min_b).bit_length() - 1)
        return (min_b, max_b, 1 << max(1, octaves // 2))

    def doctor_launch(self, host, via_mpirun):
        """The preflight first, one process per host (cclbench doctor): its table opens the report."""
        out = self.path("doctor", f"{host}.json")
        env = {"NCCL_IB_HCA": "=" + ",".join(self.inputs["hcas"])} if self.inputs.get("hcas") else {}
        argv = doctor_argv(cclbench_script(), self.inputs.get("sysfs_root"), None, host, out)
        return self.launch(f"doctor.{host}", "doctor", (self.mpirun(1, host, env) if via_mpirun else []) + argv,
                           hosts=[host], env=env, outputs=[out])

    def _cluster_plan(self, hosts):
        inputs = self.inputs
        gpn = inputs["gpus_per_node"]
        if not gpn:
            return self._cluster_mpi_plan(hosts)
        launches = [self.doctor_launch(host, True) for host in hosts]
        for host in hosts:
            out = self.path("topology", f"{host}.json")
            launches.append(self.launch(f"topology.{host}", "topology",
                                        self.mpirun(1, host) + [self.tool("topo_map"), "--json", out],
                                        hosts=[host], outputs=[out]))
        sanity_sizes = self._sanity_sizes()
        sanity_list = sweep_sizes(*sanity_sizes)
        all_hosts = ",".join(f"{host}:{gpn}" for host in hosts)
        expect = inputs.get("expect_transport") or ""
        if len(hosts) > 1:
            env = {"NCCL_IB_HCA": "=" + ",".join(inputs["hcas"])} if inputs["hcas"] else {}
            argv = self.mpirun(gpn * len(hosts), all_hosts, env) + self.coll_args(
                "sanity", sanity_sizes, ["all_reduce"], SANITY_ITERATIONS, "sanity.jsonl", expect)
            launches.append(self.launch("sanity", "sanity", argv, gpn * len(hosts), hosts, env,
                                        sizes=sanity_list, collectives=["all_reduce"]))
        else:
            argv = self.mpirun(gpn, all_hosts) + self.coll_args(
                "sanity", sanity_sizes, ["all_reduce"], SANITY_ITERATIONS, "sanity.jsonl",
                intra_expectation(expect))
            launches.append(self.launch("sanity", "sanity", argv, gpn, hosts,
                                        sizes=sanity_list, collectives=["all_reduce"]))
        for host in hosts:
            out = self.path("p2p", f"{host}.json")
            launches.append(self.launch(f"p2p.{host}", "p2p",
                                        self.mpirun(1, host) + [self.tool("p2p_matrix"), "--progress", "--json", out],
                                        hosts=[host], outputs=[out]))
        points = []
        for host in hosts:
            points.append({"base": f"intra.{host}", "kind": "intra", "nranks": gpn, "hosts": [host], "env": {},
                           "mpirun": self.mpirun(gpn, f"{host}:{gpn}"), "expect": intra_expectation(expect)})
        if len(hosts) > 1:
            for name, env in inter_bindings(inputs["hcas"], inputs.get("netdevs"), inputs["cross_nic"]):
                points.append({"base": f"inter.{name}", "kind": "inter", "nranks": gpn * len(hosts), "hosts": hosts,
                               "env": env, "mpirun": self.mpirun(gpn * len(hosts), all_hosts, env),
                               "expect": expect, "host_spec": all_hosts})
        for point in points[:len(hosts)]:
            point["host_spec"] = f"{point['hosts'][0]}:{gpn}"
        points += self._decode_and_ab(points, hosts, all_hosts, expect)
        launches += self._interleaved(points, tuning=self.tuning_enabled(True))
        return launches

    def _cluster_mpi_plan(self, hosts):
        """GPU-less hosts: the doctor and topology per host, then the MPI backend (coll_perf --backend mpi) on
        each host and across all of them; every point correctness-only (CLUSTER_MPI_NOTE), no P2P matrix, no
        NCCL binding, transport gate or TUNING probe."""
        per_host = MPI_RANKS_PER_HOST
        extra = ["--backend", "mpi"]
        note = CLUSTER_MPI_NOTE
        if self.inputs.get("decode") or self.inputs.get("ab"):
            note = f"{note}; {CLUSTER_MPI_SKIPPED_NOTE}"
        launches = [self.doctor_launch(host, True) for host in hosts]
        for host in hosts:
            out = self.path("topology", f"{host}.json")
            launches.append(self.launch(f"topology.{host}", "topology",
                                        self.mpirun(1, host) + [self.tool("topo_map"), "--json", out],
                                        hosts=[host], outputs=[out]))
        all_hosts = ",".join(f"{host}:{per_host}" for host in hosts)
        nranks = per_host * len(hosts)
        sanity_sizes = self._sanity_sizes()
        argv = self.mpirun(nranks, all_hosts) + self.coll_args(
            "sanity", sanity_sizes, ["all_reduce"], SANITY_ITERATIONS, "sanity.jsonl") + extra
        launches.append(self.launch("sanity", "sanity", argv, nranks, hosts, sizes=sweep_sizes(*sanity_sizes),
                                    collectives=["all_reduce"], mode_note=note))
        points = [{"base": f"intra.{host}", "kind": "intra", "nranks": per_host, "hosts": [host], "env": {},
                   "mpirun": self.mpirun(per_host, f"{host}:{per_host}"), "expect": "", "extra": extra, "note": note,
                   "mpi": True, "host_spec": f"{host}:{per_host}"} for host in hosts]
        if len(hosts) > 1:
            points.append({"base": "inter.mpi", "kind": "inter", "nranks": nranks, "hosts": hosts, "env": {},
                           "mpirun": self.mpirun(nranks, all_hosts), "expect": "", "extra": extra, "note": note,
                           "mpi": True, "host_spec": all_hosts})
            netdevs = self.inputs.get("netdevs") or []
            # Each rail alone (--netdevs of two interfaces or more): the TCP BTL over that interface only, so that a
            # rail slower than its sibling shows (rules/rails.judge_slow_rails).
            for netdev in netdevs if len(netdevs) > 1 else []:
                env = {}
                if launcher.launcher_of(self.inputs)["name"] == "srun":
                    env = {"OMPI_MCA_btl_tcp_if_include": netdev}  # srun takes no --mca: each rank reads its env
                    mpirun = self.mpirun(nranks, all_hosts, env)
                else:
                    mpirun = launcher.command(dict(self.inputs, mpirun_args=tcp_rail_args(
                        self.inputs.get("mpirun_args"), netdev)), nranks, all_hosts)
                points.append({"base": f"inter.mpi.rail-{netdev}", "kind": "inter", "nranks": nranks, "hosts": hosts,
                               "env": env, "mpirun": mpirun, "expect": "", "extra": extra, "note": note, "mpi": True,
                               "host_spec": all_hosts})
        launches += self._interleaved(points, tuning=False)
        return launches

    def _decode_and_ab(self, points, hosts, all_hosts, expect):
        """--decode points (8 ranks per node on each node; over the rails with the binding the sweep finds best) and
        the --ab variants beside the decode points, else beside the first intra and first all-rails inter point."""
        inputs = self.inputs
        gpn = inputs["gpus_per_node"]
        scopes = [dict(point, base=point["base"]) for point in points if point["kind"] == "intra"]
        if len(hosts) > 1:
            env = {"NCCL_CROSS_NIC": "1"}  # the production binding, until the run chooses (apply_binding)
            if inputs["hcas"]:
                env["NCCL_IB_HCA"] = "=" + ",".join(inputs["hcas"])
            scopes.append({"base": "inter.best", "kind": "inter", "nranks": gpn * len(hosts), "hosts": hosts, "env": env,
                           "mpirun": self.mpirun(gpn * len(hosts), all_hosts, env), "expect": expect,
                           "host_spec": all_hosts, "note": PRODUCTION_NOTE})
        added = decode_points(self, scopes)
        for point in added:
            if point["kind"] == "inter":
                # The binding is chosen at run time from the sweep's records (runner: choose_binding); the
                # command carries the production binding until then. A/B variants beside it inherit the rule.
                point["binding"] = {"rule": "sweep_fastest", "point": point["base"],
                                    "collective": point["decode"]["collective"], "sizes": list(point["sizes"]),
                                    "production_env": dict(point["env"]), "host_spec": all_hosts, "chosen": None}
        # Variants beside the first node's points and the points over the rails (the other nodes repeat the first).
        beside = [p for p in added if p["kind"] == "inter" or p["hosts"] == hosts[:1]] or \
            [p for p in points if p["kind"] == "intra"][:1] + [p for p in points if p["kind"] == "inter"][:1]
        return added + ab_points(self, beside)

    def _local_plan(self):
        inputs = self.inputs
        host = inputs["local_host"]
        ngpus = inputs["gpus_per_node"]
        cpus = inputs.get("cpu_count") or 1
        launches = [self.doctor_launch(host, False)]
        out = self.path("topology", f"{host}.json")
        launches.append(self.launch(f"topology.{host}", "topology", [self.tool("topo_map"), "--json", out],
                                    hosts=[host], outputs=[out]))
        if ngpus >= 2:
            nranks, extra, base, note = ngpus, [], f"local.gpus{ngpus}", None
            expect = intra_expectation(inputs.get("expect_transport") or "")
        elif ngpus == 1:
            # One GPU: the collectives run as one real rank on it (what a collective costs the GPU with no
            # peer: copies and kernel time, gated), and a small emulated point proves the multi-rank paths.
            nranks, extra, base, note, expect = 1, [], "local.gpu1", ONE_GPU_NOTE, ""
        else:
            nranks, extra, base = MPI_BACKEND_RANKS, ["--backend", "mpi"], f"local.mpi{MPI_BACKEND_RANKS}"
            note = ("no GPU visible (nvidia-smi -L found none): the MPI backend runs the collectives on "
                    "host memory; correctness only, these are not GPU or NCCL figures")
            expect = ""
        oversubscribe = nranks > cpus or ngpus == 0
        sanity_sizes = self._sanity_sizes()
        check = {"iterations": MPI_CHECK_ITERATIONS, "warmup": MPI_CHECK_WARMUP} if ngpus == 0 else {}
        argv = self.mpirun(nranks, oversubscribe=oversubscribe) + self.coll_args(
            "sanity", sanity_sizes, ["all_reduce"], check.get("iterations", SANITY_ITERATIONS), "sanity.jsonl", expect,
            warmup=check.get("warmup")) + extra
        launches.append(self.launch("sanity", "sanity", argv, nranks, [host], sizes=sweep_sizes(*sanity_sizes),
                                    collectives=["all_reduce"], mode_note=note))
        if ngpus >= 1:
            out = self.path("p2p", f"{host}.json")
            launches.append(self.launch(f"p2p.{host}", "p2p", [self.tool("p2p_matrix"), "--progress", "--json", out],
                                        hosts=[host], outputs=[out]))
        point = {"base": base, "kind": "local", "nranks": nranks, "hosts": [host], "env": {}, "extra": extra,
                 "mpirun": self.mpirun(nranks, oversubscribe=oversubscribe), "expect": expect, "note": note,
                 "oversubscribe": oversubscribe, "mpi": ngpus == 0}
        if ngpus == 0:
            # The MPI backend on host memory is correctness only: its times judge nothing, so more repeats
            # prove nothing (three of them were 144 of the 147 s of a GPU-less default baseline), nor do many
            # iterations (MPI_CHECK_ITERATIONS). Its decode points inherit both.
            point.update(check, once=True)
        scopes = [point]
        if ngpus == 1:
            # One GPU: the decode sizes also on emulated ranks (the multi-rank paths, NCCL's choices; correctness).
            scopes.append({"base": f"share-gpu{EMULATED_RANKS}", "kind": "local", "nranks": EMULATED_RANKS,
                           "hosts": [host], "env": {}, "extra": ["--share-gpu"], "expect": "", "note": EMULATED_NOTE,
                           "oversubscribe": EMULATED_RANKS > cpus,
                           "mpirun": self.mpirun(EMULATED_RANKS, oversubscribe=EMULATED_RANKS > cpus)})
        decoded = decode_points(self, scopes)
        for item in decoded:
            if item.get("mpi") and inputs.get("ab"):
                item["note"] = "; ".join(part for part in (item.get("note"), AB_MPI_NOTE) if part)
        if ngpus == 0 and inputs.get("ab") and not decoded:
            point["note"] = f"{note}; {AB_MPI_NOTE}"
        # A/B beside points where NCCL chooses: never one rank (no choice) nor the MPI backend (no NCCL).
        beside = [p for p in (decoded or [point]) if p["nranks"] > 1 and not p.get("mpi")]
        ab = ab_points(self, beside)
        # One rank has no algorithm to choose: no TUNING probe for it.
        launches += self._interleaved([point] + [p for p in decoded + ab if p["nranks"] == nranks],
                                      tuning=self.tuning_enabled(ngpus > 0) and nranks > 1)
        others = [p for p in decoded + ab if p["nranks"] != nranks]
        if others:
            launches += self._interleaved(others, tuning=self.tuning_enabled(ngpus > 0))
        if ngpus == 1:
            launches.append(self.emulated_check(host, oversubscribe=EMULATED_RANKS > cpus))
        if ngpus >= 1:
            # The smoke's own cases under the same names: every GPU baseline is a smoke reference (smoke --against).
            launches += smoke_reference_launches(self, host)
        return launches

    def emulated_check(self, host, oversubscribe):
        """Correctness of the multi-rank code paths on one GPU: every collective, both placements, sizes
        across NCCL's protocol changes, few iterations, checked; run once (its times mean nothing)."""
        name = f"local.share-gpu{EMULATED_RANKS}"
        sizes = EMULATED_CHECK_SIZES
        argv = self.mpirun(EMULATED_RANKS, oversubscribe=oversubscribe) + self.coll_args(
            name, sizes, KNOWN_COLLECTIVES, EMULATED_CHECK_ITERATIONS, warmup=EMULATED_CHECK_WARMUP) + ["--share-gpu"]
        return self.launch(name, "local", argv, EMULATED_RANKS, [host], base_point=name, repeat=1,
                           sizes=sweep_sizes(*sizes), collectives=list(KNOWN_COLLECTIVES), mode_note=EMULATED_NOTE)


NO_RDMA_NOTE = ("no active RDMA port found by topo_map: the inter-node points run without an NCCL_IB_HCA binding "
                "(one binding, NCCL picks its transport: sockets where there is no RDMA; the transport gate says "
                "which it used); pass --hcas HCA:PORT,... to sweep the rails")


def mode_notes(inputs):
    """One-line notes `plan` prints to stderr about the plan as a whole: the MPI backend on GPU-less hosts, and
    the measurement environment passed to every rank on every host."""
    notes = []
    if inputs["hosts"] and not inputs["gpus_per_node"]:
        notes.append(CLUSTER_MPI_NOTE)
    if inputs.get("hcas_found") == "none":
        notes.append(NO_RDMA_NOTE)
    exported = sorted(inputs.get("exported_env") or {}) + list(inputs.get("exported_env_names") or [])
    if exported:
        notes.append("passed to every rank on every host (set here): " + ", ".join(exported))
    return notes


def once_note(inputs, launches):
    """The plan's note on correctness-only points (MPI backend on host memory, emulated ranks) that run once
    whatever --repeat says, or None when there is none or --repeat is 1."""
    repeats = inputs.get("repeat") or 1
    if repeats <= 1:
        return None
    named = []
    for launch in launches:
        argv = launch.get("argv") or []
        if launch.get("kind") != "local" or launch.get("name") != launch.get("base_point"):
            continue  # a repeated point's launches are named base.repN
        if "--share-gpu" in argv:
            named.append(f"{launch['name']} (emulated ranks)")
        elif "--backend" in argv[:-1] and argv[argv.index("--backend") + 1] == "mpi":
            named.append(f"{launch['name']} (MPI backend on host memory)")
    if not named:
        return None
    return (f"correctness-only points run once whatever --repeat {repeats} says (their times judge nothing, more "
            f"repeats prove nothing about correctness): {', '.join(named)}")


def by_design_note(launches):
    """The plan's note on cases coll_perf will skip because no run can verify them (rules/by_design.py): in-place
    alltoall/sendrecv under checking at more than one rank on NCCL; one --placement covers a launch's collectives."""
    points, collectives = [], []
    for launch in launches:
        argv = launch.get("argv") or []
        flag = lambda name, default: argv[argv.index(name) + 1] if name in argv[:-1] else default
        if launch.get("kind") not in ("local", "intra", "inter") or (launch.get("nranks") or 1) <= 1 or \
                flag("--backend", "nccl") != "nccl" or flag("-c", "1") == "0" or flag("--placement", "both") == "out":
            continue
        found = [c for c in launch.get("collectives") or [] if c in ("alltoall", "sendrecv")]
        collectives += [c for c in found if c not in collectives]
        if found and launch.get("base_point", launch["name"]) not in points:
            points.append(launch.get("base_point", launch["name"]))
    if not points:
        return None
    shown = ", ".join(points[:3]) + (f" and {len(points) - 3} more" if len(points) > 3 else "")
    return (f"not verifiable by design: in-place {' and '.join(sorted(collectives))} at more than one rank (NCCL defines no in-place "
            f"result, so coll_perf skips them with its reason; the report lists them once, never as an anomaly): {shown}")


def plan_mode(inputs):
    hosts = inputs["hosts"]
    if hosts:
        return "multi_node" if len(hosts) > 1 else "single_node"
    gpus = inputs["gpus_per_node"]
    return "local_gpus" if gpus >= 2 else ("local_share_gpu" if gpus == 1 else "local_mpi")


def format_launch(launch):
    return shlex.join(launch["argv"])
