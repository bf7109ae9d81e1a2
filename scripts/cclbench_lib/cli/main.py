"""Command line: plan, baseline, report, compare, smoke, doctor, screen, docs. Every failure is one stderr line."""

import argparse
import os
import re
import subprocess
import sys
import tempfile

from ..base import locations
from ..base.environment import exported_env
from ..base.errors import CclbenchError, UsageError
from ..base.files import read_json, write_json_atomic
from ..base.locations import resolve_program
from ..base.values import (DEFAULT_COLLECTIVES, DEFAULT_CROSS_NIC, default_run_id, parse_collectives, parse_cross_nic,
                           parse_hcas, parse_netdevs, parse_percent, parse_size, split_mpirun_args, sweep_sizes, validate_run_id)
from ..base.version import SCHEMA_VERSION, TOOL_VERSION
from ..cli.docs import add_docs_parser, cmd_docs, tool_help
from ..cli.doctor import add_doctor_parser
from ..cli.screen import add_screen_parser, cmd_screen
from ..execute.doctor import run_doctor_command
from ..execute.runner import Baseline
from ..execute.smoke import capture_reference, run_smoke, smoke_launches, write_smoke_reference
from ..model.hosts import check_resolvable, hosts_and_slots, local_gpu_count, local_hostname
from ..model.launcher import LAUNCHER_CHOICES, choose_launcher, launcher_of
from ..model.smoke_reference import (CAPTURE_RUNS_DEFAULT, MAX_AGE_DAYS_DEFAULT, MIN_CAPTURE_RUNS, measured_problem,
                                     read_reference)
from ..plan.smoke_cases import PARTS, TESTING_VARIABLE, TIMED_PARTS
from ..plan.baseline import DEFAULT_EXPECT, Planner, by_design_note, format_launch, mode_notes, once_note, plan_mode
from ..plan.decode import AB_MAX_VARIANTS, parse_ab, parse_decode, plan_notes
from ..plan.estimate import estimate_line
from ..render.compare import comparable_text, run_compare
from ..rules.compare import NOT_COMPARABLE_EXIT, OTHER_HARDWARE_CHOICES
from ..render.report import build_report
from ..render.verdict import console_line


# The build tree's programs in a checkout, PREFIX/bin when installed (locations.py).
DEFAULT_BIN_DIR = locations.bin_dir()


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage problem as one line (and exit 2) instead of usage + message."""

    def error(self, message):
        raise UsageError(message)


class VersionAction(argparse.Action):
    """--version, unwrapped (argparse's version action re-flows long paths across lines)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"cclbench {TOOL_VERSION} (programs: {DEFAULT_BIN_DIR}; schemas: {locations.schema_dir()})")
        parser.exit()


def positive_int(what, low=1, high=1 << 30):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise UsageError(f"{what}: '{text}' is not a whole number") from None
        if not low <= value <= high:
            raise UsageError(f"{what}: {value} is out of range ({low}..{high})")
        return value
    return parse


def seconds(what):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"{what}: '{text}' is not a number of seconds") from None
        if not 0 < value < 1e7:
            raise UsageError(f"{what}: {text} is out of range")
        return value
    return parse


def add_launcher_options(parser):
    parser.add_argument("--bin-dir", help="where coll_perf, topo_map, p2p_matrix live (default: the build's "
                        "bench/apps in a checkout, PREFIX/bin when installed; cclbench --version prints it)")
    parser.add_argument("--mpirun", default="mpirun", help="the MPI launcher (default: mpirun on PATH)")
    parser.add_argument("--mpirun-args", action="append", default=[], metavar="ARGS",
                        help="extra launcher arguments, split like a shell would but never run through one; "
                             "use the = form: --mpirun-args='--mca btl ^openib' (repeatable). "
                             "--allow-run-as-root is added automatically as root")
    parser.add_argument("--launcher", choices=LAUNCHER_CHOICES, default="auto",
                        help="how ranks start: srun inside a Slurm allocation when srun and the MPI support PMIx or "
                             "PMI2, else mpirun (auto, the default); or force mpirun or srun")
    parser.add_argument("--srun-args", action="append", default=[], metavar="ARGS",
                        help="extra srun arguments when srun launches, split like --mpirun-args (repeatable)")
    parser.add_argument("--results", default="results", help="results root (default ./results)")
    parser.add_argument("--run-id", help="run directory name (default: UTC timestamp %%Y%%m%%dT%%H%%M%%SZ)")


def add_plan_options(parser):
    where = parser.add_argument_group("where")
    where.add_argument("--hosts", help="comma-separated hosts (example: node5,node7)")
    where.add_argument("--hostfile", help="Open MPI hostfile ('node5 slots=8' lines)")
    where.add_argument("--gpus-per-node", type=positive_int("--gpus-per-node", 1, 1024),
                       help="GPUs (ranks) per node (default: hostfile slots, else nvidia-smi -L here)")
    where.add_argument("--hcas", help="RDMA rails as HCA:port list (default: discovered with topo_map --json)")
    what = parser.add_argument_group("what")
    what.add_argument("-b", "--minbytes", default="8K", help="smallest size (default 8K)")
    what.add_argument("-e", "--maxbytes", default="64M", help="largest size (default 64M)")
    what.add_argument("-f", "--stepfactor", type=positive_int("-f", 2, 1 << 20), default=2, help="size factor (default 2)")
    what.add_argument("--coll", default=",".join(DEFAULT_COLLECTIVES), help="collectives (default: the four)")
    what.add_argument("-n", "--iters", type=positive_int("-n", 1, 1 << 24), default=20, help="timed iterations (default 20)")
    what.add_argument("-w", "--warmup_iters", type=positive_int("-w", 0, 1 << 20), default=5, help="warmup iterations (default 5)")
    what.add_argument("--repeat", type=positive_int("--repeat", 1, 100), default=3,
                      help="run every timed point N times, each a separate launch, interleaved across points; the "
                           "headline is the median (default 3)")
    what.add_argument("--cross-nic", default=",".join(str(v) for v in DEFAULT_CROSS_NIC),
                      help="NCCL_CROSS_NIC values for the multi-node sweep (default 0,1,2)")
    what.add_argument("--expect-transport", default=DEFAULT_EXPECT,
                      help=f"transport gate for coll_perf (default '{DEFAULT_EXPECT}'; 'none' disables)")
    what.add_argument("--no-tuning-probe", dest="tuning_probe", action="store_false",
                      help="do not ask coll_perf for its untimed TUNING probe (algorithm/protocol per size)")
    what.add_argument("--netdevs", metavar="IF[,IF]", help="rail interfaces whose byte counters coll_perf records per "
                      "host at every point (coll_perf --netdevs; example eth0,eth3): rails seen on the MPI backend "
                      "over TCP, or where NCCL's NET/Socket line is not found")
    what.add_argument("--sysfs-root", help="coll_perf --sysfs-root for rail counters (default: coll_perf's, /sys)")
    what.add_argument("--cv-gate", default="3%", help="per-case CV target across repeats: a case above it is a "
                      "warning; a point fails only when its spread is systematic (the repeat rule in docs/bring-up.md; "
                      "default 3%%)")
    what.add_argument("--decode", metavar="SPEC", help="also measure the model's decode messages: hidden=H,dtype=bfloat16,"
                      "batches=1,2,4,...[,collectives=all_reduce,alltoall][,per_step=N][,topk=K]; sizes are exactly "
                      "H x batch x element size (alltoall: x topk), in CUDA-graph mode")
    what.add_argument("--ab", action="append", default=[], metavar="NCCL_VAR=V1,V2",
                      help="run every combination of these NCCL_* values as points beside the automatic one "
                           f"(repeatable; the cross product, at most {AB_MAX_VARIANTS}); the report gives the verdict")
    what.add_argument("--timeout", type=positive_int("--timeout", 1, 1 << 24),
                      help="coll_perf's watchdog -T, seconds per phase of a case (default: derived from each launch's "
                           "sizes, iterations, ranks and backend; generous for a healthy run; plan --json shows it)")
    what.add_argument("--launch-timeout", type=seconds("--launch-timeout"),
                      help="stop a launch after this many seconds (default: a bound derived from the launch's plan, "
                           "past its watchdog; plan --json shows it as bound_s)")
    add_launcher_options(parser)


def build_parser():
    parser = Parser(prog="cclbench", description="cclbench orchestration: one-command communication baseline, "
                    "report, compare and CI smoke test.")
    parser.add_argument("--version", action=VersionAction, nargs=0, help="show the version and where the programs "
                        "and schemas are, then exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    plan = sub.add_parser("plan", help="print every launch of a baseline, one command line each, without running")
    add_plan_options(plan)
    plan.add_argument("--json", dest="plan_json", metavar="FILE", help="also write the plan as JSON (plan.schema.json)")
    base = sub.add_parser("baseline", help="run the baseline into RESULTS/RUN_ID")
    add_plan_options(base)
    base.add_argument("--dry-run", action="store_true", help="print the plan and stop (same as plan)")
    base.add_argument("--resume", metavar="RUN_ID", help="continue RUN_ID: skip points whose records are complete and ok")
    base.add_argument("--verbose", action="store_true", help="also echo launch output to stderr (always in run.log)")
    base.add_argument("--run-despite-doctor", action="store_true",
                      help="run the launches across hosts even when the doctor failed a path between them (path MTU, "
                           "a rail down); by default they are recorded as not run with the doctor's finding, and the "
                           "run exits 1")
    report = sub.add_parser("report", help="write RUN_DIR/report.md and plots")
    report.add_argument("run_dir")
    report.add_argument("--cv-gate", help="CV gate in percent (default: the run's, else 3%%)")
    compare = sub.add_parser("compare", help="compare two runs case by case (exit 1 on a regression, 3 when nothing "
                             "is comparable)")
    compare.add_argument("run_a", help="the reference: a run directory, or a smoke reference file (smoke_reference.json)")
    compare.add_argument("run_b", help="the run judged: a run directory or a smoke reference file")
    compare.add_argument("--out", help="write the markdown here instead of stdout")
    compare.add_argument("--json", help="write compare.json here (default: next to --out as NAME.json, else "
                                        "RUN_B/compare.json, or compare.json beside RUN_B when it is a file)")
    compare.add_argument("--threshold", default="2%", help="smallest difference ever called a change (default 2%%)")
    compare.add_argument("--fail-above", default="5%", help="a slowdown above this is a regression (default 5%%)")
    compare.add_argument("--host-times", action="store_true",
                         help="also give MPI-backend (host memory) cases time verdicts (default: correctness only)")
    compare.add_argument("--other-hardware", choices=OTHER_HARDWARE_CHOICES, default="warn",
                         help="runs measured on another GPU model or count, NVIDIA driver, CUDA or NCCL version: compare "
                              "them with a warning (warn, the default: a before/after of an upgrade) or refuse them "
                              f"(exit {NOT_COMPARABLE_EXIT})")
    smoke = sub.add_parser("smoke", help="single-GPU CI smoke test (< 60 s), JUnit XML out")
    add_launcher_options(smoke)
    smoke.add_argument("--junit", help="JUnit XML path (default RUN_DIR/smoke.junit.xml)")
    smoke.add_argument("--time-limit", type=seconds("--time-limit"), default=60.0, help="whole-test budget (default 60 s)")
    smoke.add_argument("--against", metavar="REFERENCE",
                       help="judge the smoke's cases against a measured reference: the run directory of smoke "
                            "--capture, or its smoke_reference.json kept anywhere (docs/ci.md); exit 1 on a slowdown "
                            "beyond a case's measured band, an unstable case or a shift of the whole GPU, "
                            f"{NOT_COMPARABLE_EXIT} when nothing is comparable")
    smoke.add_argument("--other-hardware", choices=OTHER_HARDWARE_CHOICES, default="refuse",
                       help="a reference measured on another GPU model or count, NVIDIA driver, CUDA or NCCL version: "
                            f"refuse it (refuse, the default: exit {NOT_COMPARABLE_EXIT}) or compare with a warning (warn)")
    smoke.add_argument("--fail-above", default="0%", help="a slowdown beyond its measured band is a regression only "
                       "above this too (default 0%%: the band decides)")
    smoke.add_argument("--parts", default=",".join(PARTS),
                       help=f"the parts to run, comma-separated: {', '.join(PARTS)} (default all; --against judges the "
                            "timed parts it ran: copy, collective, graph)")
    smoke.add_argument("--capture", metavar="N", type=positive_int("--capture", MIN_CAPTURE_RUNS, 1000),
                       help=f"make a measured smoke reference instead: N runs of the timed parts on this (idle) machine, "
                            f"merged into RUN_DIR/smoke_reference.json with their measured spread (at least "
                            f"{MIN_CAPTURE_RUNS}; {CAPTURE_RUNS_DEFAULT} recommended; docs/ci.md)")
    smoke.add_argument("--capture-every", metavar="SECONDS", type=seconds("--capture-every"), default=0.0,
                       help="with --capture: start a capture run every SECONDS (default 0: back to back), so that the "
                            "spread sees how the machine drifts over minutes (docs/ci.md: 10 runs over 10 minutes)")
    smoke.add_argument("--max-age-days", type=positive_int("--max-age-days", 0, 36500), default=MAX_AGE_DAYS_DEFAULT,
                       help=f"with --capture: days the reference is trusted before --against refuses it (exit "
                            f"{NOT_COMPARABLE_EXIT}; default {MAX_AGE_DAYS_DEFAULT}, 0: no limit)")
    # The slowdown test knob (tests only, refused otherwise): not shown in --help.
    smoke.add_argument("--inject-slowdown", metavar="PART=PCT", help=argparse.SUPPRESS)
    smoke.add_argument("--verbose", action="store_true")
    add_doctor_parser(sub)
    add_screen_parser(sub, add_launcher_options, positive_int, seconds)
    add_docs_parser(sub)
    return parser


def launcher_choice(args):
    return choose_launcher(args.launcher, args.mpirun, srun_args=split_mpirun_args(args.srun_args, "--srun-args"))


def discover_hcas(bin_dir):
    """Active RDMA ports of this node, from topo_map --json (which reads sysfs through hwloc)."""
    tool = os.path.join(bin_dir, "topo_map")
    if not os.access(tool, os.X_OK):
        raise UsageError(f"cannot discover HCAs: {tool} is not built; pass --hcas mlx5_0:1,mlx5_3:1")
    with tempfile.TemporaryDirectory(prefix="cclbench-topo-") as scratch:
        out = os.path.join(scratch, "topo.json")
        try:
            result = subprocess.run([tool, "--json", out], capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.SubprocessError) as error:
            raise UsageError(f"cannot discover HCAs: topo_map failed ({error}); pass --hcas") from None
        if result.returncode != 0 or not os.path.exists(out):
            raise UsageError(f"cannot discover HCAs: topo_map exited {result.returncode}; pass --hcas")
        model = read_json(out, "topo_map output")
    hcas = []
    for nic in model.get("nics") or []:
        for port in (nic.get("ports") or []) if isinstance(nic, dict) else []:
            state = str(port.get("state", "")).upper() if isinstance(port, dict) else ""
            if "ACTIVE" in state and nic.get("name"):
                hcas.append(f"{nic['name']}:{port.get('port')}")
    if not hcas:
        return []  # no RDMA here: the inter-node points run unbound and the plan says so (plan/baseline.mode_notes)
    return parse_hcas(",".join(hcas))


def coll_perf_flags(bin_dir):
    """The long flags `coll_perf --help` lists (None when it is not built: the planner then assumes the
    newest). The plan adapts to the build instead of failing on a flag an older build lacks."""
    text = tool_help(bin_dir, "coll_perf")
    if text is None:
        return None
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text)))


def plan_inputs(args):
    """Validated plan inputs (a plain dict: stored in the manifest and replayed on --resume)."""
    hosts, slots, granted = hosts_and_slots(args.hosts, args.hostfile)
    if not (args.hosts or args.hostfile) and hosts == [local_hostname()]:
        # A one-node allocation of this very machine is planned like the machine itself (the local
        # plan picks GPUs, one shared GPU or the MPI backend); its ranks still start through srun.
        hosts = []
    local_gpus = local_gpu_count()
    if hosts:
        # GPUs per node: --gpus-per-node, the hostfile's slots, the allocation's GPUs, else this node's own
        # count (nvidia-smi -L). None anywhere: 0, the MPI backend on every host (correctness only); the
        # topology step then holds every host to it (execute/runner.py).
        gpus = args.gpus_per_node or slots or granted or local_gpus
        if slots is not None and args.gpus_per_node and args.gpus_per_node > slots:
            raise UsageError(f"--gpus-per-node {args.gpus_per_node} exceeds the hostfile's slots={slots}")
    else:
        if args.gpus_per_node and args.gpus_per_node > local_gpus:
            raise UsageError(f"--gpus-per-node {args.gpus_per_node} but this node has {local_gpus} GPU(s) (nvidia-smi -L)")
        gpus = args.gpus_per_node or (min(granted, local_gpus) if granted else local_gpus)
    min_bytes = parse_size(args.minbytes, "-b")
    max_bytes = parse_size(args.maxbytes, "-e")
    sweep_sizes(min_bytes, max_bytes, args.stepfactor)
    bin_dir = os.path.abspath(args.bin_dir or DEFAULT_BIN_DIR)
    hcas_found = None
    if len(hosts) > 1 and gpus:
        hcas = parse_hcas(args.hcas) if args.hcas else discover_hcas(bin_dir)
        hcas_found = "given" if args.hcas else ("topo_map" if hcas else "none")
    elif len(hosts) > 1:
        hcas = []  # the MPI backend: no NCCL, no NCCL_IB_HCA binding; its TCP rails come from --mpirun-args
    else:
        hcas = parse_hcas(args.hcas) if args.hcas else []
    expect = "" if str(args.expect_transport).lower() in ("", "none", "off") else args.expect_transport
    if hosts and not gpus:
        expect = ""  # no NCCL transport to gate
    exported, exported_names = exported_env()
    return {
        "hosts": hosts, "local_host": local_hostname(), "gpus_per_node": gpus, "hcas": hcas,
        "min_bytes": min_bytes, "max_bytes": max_bytes, "step_factor": args.stepfactor,
        "collectives": parse_collectives(args.coll), "iterations": args.iters, "warmup": args.warmup_iters,
        "repeat": args.repeat, "cross_nic": parse_cross_nic(args.cross_nic), "expect_transport": expect,
        "cv_gate_pct": parse_percent(args.cv_gate, "--cv-gate"), "timeout_s": args.timeout,
        "launch_timeout_s": args.launch_timeout, "bin_dir": bin_dir, "mpirun": args.mpirun,
        "mpirun_args": split_mpirun_args(args.mpirun_args), "launcher": launcher_choice(args),
        "as_root": os.geteuid() == 0, "cpu_count": os.cpu_count() or 1, "coll_perf_flags": coll_perf_flags(bin_dir),
        "tuning_probe": args.tuning_probe, "sysfs_root": os.path.abspath(args.sysfs_root) if args.sysfs_root else None,
        "decode": parse_decode(args.decode), "ab": parse_ab(args.ab),
        "exported_env": exported, "exported_env_names": exported_names, "hcas_found": hcas_found,
        "netdevs": parse_netdevs(args.netdevs), "run_despite_doctor": bool(getattr(args, "run_despite_doctor", False)),
    }


def run_dir_for(args, run_id):
    return os.path.join(os.path.abspath(args.results), validate_run_id(run_id))


def check_tools(inputs, launches):
    chosen = launcher_of(inputs)
    resolve_program(chosen["program"], chosen["name"])
    for launch in launches:
        for word in launch["argv"]:
            if word.startswith(inputs["bin_dir"] + os.sep):
                if not (os.path.isfile(word) and os.access(word, os.X_OK)):
                    raise CclbenchError(f"{os.path.basename(word)} is not built in {inputs['bin_dir']} "
                                        "(build it, or pass --bin-dir)", 2)
                break


def plan_document(inputs, run_dir, launches):
    return {"schema_version": SCHEMA_VERSION, "run_id": os.path.basename(run_dir), "run_dir": run_dir,
            "mode": plan_mode(inputs), "plan_inputs": inputs,
            "launches": [dict(launch, command=format_launch(launch)) for launch in launches]}


def cmd_plan(args, out):
    run_id = args.run_id or default_run_id()
    run_dir = run_dir_for(args, run_id)
    inputs = plan_inputs(args)
    launches = Planner(inputs, run_dir).build()
    for launch in launches:
        out.write(format_launch(launch) + "\n")
    for note in mode_notes(inputs) + plan_notes(inputs, launches) + [once_note(inputs, launches),
                                                                     by_design_note(launches)]:
        if note:
            print(f"cclbench: note: {note}", file=sys.stderr)
    print(f"cclbench: plan: {estimate_line(launches, inputs)}", file=sys.stderr)
    if getattr(args, "plan_json", None):
        write_json_atomic(args.plan_json, plan_document(inputs, run_dir, launches))
    return 0


def cmd_baseline(args, argv):
    if args.dry_run:
        return cmd_plan(args, sys.stdout)
    if args.resume:
        if args.run_id and args.run_id != args.resume:
            raise UsageError(f"--run-id {args.run_id} and --resume {args.resume} disagree")
        run_dir = run_dir_for(args, args.resume)
        if not os.path.isdir(run_dir):
            raise UsageError(f"--resume {args.resume}: {run_dir} does not exist")
        manifest = read_json(os.path.join(run_dir, "run_manifest.json"), "run manifest")
        inputs = manifest.get("plan_inputs") if isinstance(manifest, dict) else None
        if not isinstance(inputs, dict):
            raise CclbenchError(f"{run_dir}/run_manifest.json has no plan_inputs: cannot resume", 2)
        inputs = dict(inputs, as_root=os.geteuid() == 0, run_despite_doctor=args.run_despite_doctor)
    else:
        inputs = plan_inputs(args)
        run_dir = run_dir_for(args, args.run_id or default_run_id())
        if os.path.lexists(run_dir):
            raise UsageError(f"{run_dir} already exists: pass --resume {os.path.basename(run_dir)} to continue it, "
                             "or choose another --run-id")
    runner = Baseline(inputs, run_dir, resume=bool(args.resume), verbose=args.verbose, argv=argv)
    check_tools(inputs, runner.launches)
    if inputs["hosts"]:
        check_resolvable(inputs["hosts"])
    try:
        return runner.run()
    finally:
        if os.path.isfile(os.path.join(run_dir, "run_manifest.json")):
            # Every baseline is a smoke reference (smoke --against RUN_DIR, or this file kept anywhere): its smoke.*
            # points, or none (no GPU: nothing a smoke can be compared with, and the reference says so).
            try:
                write_smoke_reference(run_dir)  # silent: the console's last line stays the verdict
            except (CclbenchError, OSError) as error:
                print(f"cclbench: smoke reference not written: {error}", file=sys.stderr)


def cmd_report(args):
    cv_gate = parse_percent(args.cv_gate, "--cv-gate") if args.cv_gate else None
    path, anomalies, verdict = build_report(args.run_dir, cv_gate)
    print(f"cclbench: wrote {path} ({len(anomalies)} anomal{'y' if len(anomalies) == 1 else 'ies'})", file=sys.stderr)
    print(console_line(verdict, os.path.abspath(args.run_dir)), file=sys.stderr)
    return 0


def cmd_compare(args):
    threshold = parse_percent(args.threshold, "--threshold")
    fail_above = parse_percent(args.fail_above, "--fail-above")
    regressions, json_path, comparable, code = run_compare(args.run_a, args.run_b, threshold, fail_above, args.out,
                                                           sys.stdout, args.host_times, args.json, args.other_hardware)
    said = comparable_text(comparable)
    if code == NOT_COMPARABLE_EXIT:
        print(f"cclbench: error: {said}; {json_path}", file=sys.stderr)
        return code
    if said:
        print(f"cclbench: {said}", file=sys.stderr)
    if regressions:
        print(f"cclbench: error: {len(regressions)} regression(s), first: {regressions[0]}; {json_path}",
              file=sys.stderr)
        return code
    print(f"cclbench: no regression; {json_path}", file=sys.stderr)
    return code


def parse_parts(text):
    parts = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [part for part in parts if part not in PARTS]
    if unknown or not parts:
        raise UsageError(f"--parts: {', '.join(unknown) or 'nothing'} is not a smoke part ({', '.join(PARTS)})")
    return tuple(part for part in PARTS if part in parts)


def parse_injection(text, parts):
    """--inject-slowdown PART=PCT: the slowdown test knob. Refused unless CCLBENCH_TESTING=1 (set by cclbench's tests
    only), so it can never reach a user's results."""
    if os.environ.get(TESTING_VARIABLE) != "1":
        raise UsageError(f"--inject-slowdown is a test knob (it slows the measurement on purpose): refused outside "
                         f"cclbench's tests, which set {TESTING_VARIABLE}=1")
    part, _, pct = text.partition("=")
    if part not in TIMED_PARTS:
        raise UsageError(f"--inject-slowdown: {part!r} is not a timed part ({', '.join(TIMED_PARTS)})")
    if part not in parts:
        raise UsageError(f"--inject-slowdown: part {part} is not among --parts")
    value = parse_percent(pct, "--inject-slowdown")
    if not 0 < value <= 100:
        raise UsageError("--inject-slowdown: the slowdown must be above 0% and at most 100%")
    return part, value


def cmd_smoke(args, argv):
    run_dir = run_dir_for(args, args.run_id or default_run_id("smoke-"))
    if os.path.lexists(run_dir):
        raise UsageError(f"{run_dir} already exists: choose another --run-id")
    parts = parse_parts(args.parts)
    inject = parse_injection(args.inject_slowdown, parts) if args.inject_slowdown else None
    if args.capture and (args.against or inject):
        raise UsageError("--capture makes a reference: it takes neither --against nor --inject-slowdown")
    if args.capture_every and not args.capture:
        raise UsageError("--capture-every spaces the runs of --capture N: give --capture too")
    against = None
    if args.against:
        # Read and checked first: a reference that is not one is refused (exit 2) before anything is measured.
        reference, source = read_reference(args.against)
        problem = measured_problem(reference)
        if problem:
            raise UsageError(f"--against {source}: not a measured smoke reference: {problem}")
        against = {"reference": reference, "source": source, "other_hardware": args.other_hardware,
                   "fail_above_pct": parse_percent(args.fail_above, "--fail-above")}
    have_gpu = local_gpu_count() > 0
    inputs = {"hosts": [], "local_host": local_hostname(), "gpus_per_node": 1 if have_gpu else 0, "hcas": [],
              "min_bytes": 8 << 10, "max_bytes": 1 << 20, "step_factor": 8, "collectives": list(DEFAULT_COLLECTIVES),
              "iterations": 5, "warmup": 1, "repeat": 1, "cross_nic": [], "expect_transport": "", "cv_gate_pct": 3.0,
              "timeout_s": None, "launch_timeout_s": 45.0, "bin_dir": os.path.abspath(args.bin_dir or DEFAULT_BIN_DIR),
              "mpirun": args.mpirun, "mpirun_args": split_mpirun_args(args.mpirun_args), "as_root": os.geteuid() == 0,
              "cpu_count": os.cpu_count() or 1, "time_limit_s": args.time_limit, "tuning_probe": False,
              "sysfs_root": None, "launcher": launcher_choice(args)}
    inputs["coll_perf_flags"] = coll_perf_flags(inputs["bin_dir"])
    check_tools(inputs, smoke_launches(inputs, run_dir, have_gpu, parts, inject)[0])
    junit = os.path.abspath(args.junit) if args.junit else os.path.join(run_dir, "smoke.junit.xml")
    if args.capture:
        return capture_reference(inputs, run_dir, junit, have_gpu, argv, args.verbose,
                                 {"runs": args.capture, "max_age_days": args.max_age_days,
                                  "every_s": args.capture_every})
    return run_smoke(inputs, run_dir, junit, have_gpu, argv, args.verbose, against, parts, inject)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        if args.command == "plan":
            return cmd_plan(args, sys.stdout)
        if args.command == "baseline":
            return cmd_baseline(args, ["cclbench"] + argv)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "compare":
            return cmd_compare(args)
        if args.command == "smoke":
            return cmd_smoke(args, ["cclbench"] + argv)
        if args.command == "doctor":
            return run_doctor_command(args)
        if args.command == "screen":
            return cmd_screen(args, ["cclbench"] + argv, launcher_choice, coll_perf_flags, DEFAULT_BIN_DIR)
        if args.command == "docs":
            return cmd_docs(args, build_parser(), DEFAULT_BIN_DIR)
        raise UsageError(f"unknown command {args.command}")
    except CclbenchError as error:
        print(f"cclbench: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("cclbench: error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 1
    except Exception as error:  # the contract is one line, never a traceback
        if os.environ.get("CCLBENCH_DEBUG") == "1":
            raise
        print(f"cclbench: error: internal error: {type(error).__name__}: {error} (CCLBENCH_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 5
