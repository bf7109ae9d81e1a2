"""`baseline`: runs a plan into results/<RUN_ID>/, resumable point by point."""

import csv
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

from ..base.environment import TEST_KNOB_VARIABLES
from ..base.errors import CclbenchError
from ..base.files import make_dirs, open_append, read_json, terminate_last_line, write_atomic
from ..base.values import utc_now, variant_text
from ..execute.doctor import merge_run_directory, path_mtu_run_directory, recheck_paths
from ..execute.manifest import manifest_path, new_manifest, pending_point, save_manifest
from ..execute.progress import LaunchProgress, start_allowance_s, watches_progress
from ..model import launcher
from ..model.records import CASES_FILE, SANITY_FILE, cases_path, latest_by_case, load_cases
from ..model.doctor_paths import path_mtu_findings
from ..model.run_dir import launch_outputs, load_run_doctor
from ..plan.baseline import Planner, mode_notes
from ..plan.bounds import PROGRESS_GRACE_S, STOP_GRACE_S, launch_bounds
from ..plan.estimate import (PATH_CHECK_S, TWO_PASS_KINDS, calibrated_eta, launch_kind, launch_parts, measured_shape,
                             report_seconds, work_shape)
from ..render.report import build_report, plots_expected
from ..render.verdict import console_line, headline, reason_text
from ..rules.ab import choose_binding, sweep_bindings
from ..rules.dead_paths import (PATH_DEAD, attribute, crosses_hosts, dead_netdevs, failed_paths as failed_run_paths,
                                fault_subject, may_be_a_path, needed_rails, observe, paths_needed, run_not_run_reason,
                                steer_mpi_traffic, unreached_hosts)
from ..rules.doctor_gate import failed_paths, host_findings, not_run_reason, paths_crossed, quoted
from ..rules.rails import _is_mpi
from ..rules.repeat_rule import judge_repeatability
from ..rules.verdict import FAIL, FAILED


# After SIGTERM, how long the launcher's process group has before SIGKILL (plan/bounds.STOP_GRACE_S): mpirun
# forwards SIGTERM to every rank and waits for its daemons on the other hosts; a rank stopped there (SIGSTOP) or a
# daemon that never answers must not hold the launch.
# After the launcher exited (or was killed), how long its output may still take to close: a process that
# escaped the launcher's process group and keeps the pipe open must not hold the run.
OUTPUT_CLOSE_GRACE_S = 30
# coll_perf's watchdog message (bench/core/watchdog.cpp): the case, size, phase, rank and host that did not finish.
WATCHDOG_LINE = re.compile(r"timeout: (case \S+ \(size \d+ B, [^)]*\) on rank \d+ \([^)]*\)) did not finish within "
                           r"([0-9.]+) s(?: \(learned deadline: (.*); aborting every rank)?")
# coll_perf's timeout exit status (bench/core/errors.hpp ExitCode::timeout); the runner's bound uses it too.
TIMEOUT_EXIT = 4

EXIT_MEANINGS = {0: "ok", 1: "some case failed or data was wrong", 2: "bad usage", 3: "transport expectation failed",
                 4: "timeout", 5: "runtime error", 6: "peer lost", 7: "nothing measured", 130: "interrupted",
                 143: "terminated"}


def exit_meaning(code):
    """The launcher's status when a rank died of a signal: 128 + N from mpirun (a negative code when the
    launcher itself was killed)."""
    number = code - 128 if code is not None and 128 < code < 160 else (-code if code is not None and code < 0 else None)
    if number:
        try:
            return f"a rank or the launcher died of {signal.Signals(number).name}"
        except ValueError:
            pass
    return "unexpected exit status"


def signal_group(child, signum):
    """signum to the process group a launch runs in (started with start_new_session: its id is the launcher's)."""
    try:
        os.killpg(child.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class Interrupted(Exception):
    def __init__(self, signum):
        super().__init__(f"signal {signum}")
        self.signum = signum


def signal_name(signum):
    """SIGINT, SIGTERM, ... (the number when it has no name)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Progress:
    """One stderr line per finished launch, with elapsed time and an ETA: the plan's model of each launch still to
    run (plan/estimate.launch_parts: start-up and work), calibrated by the launches of this run that completed
    (calibrated_eta). outlook(names) -> (the names among those still to run that will not run, seconds of a pending
    path check): the runner's (Baseline.eta_outlook); the ETA leaves the first out and adds the second, and report_s,
    what the run's end takes after its last launch (plan/estimate.report_seconds)."""

    def __init__(self, launches, stream=sys.stderr, inputs=None, outlook=None, report_s=0.0):
        inputs = inputs or {}
        self.report_s = report_s  # what the run's end (its report) takes after the last launch
        self.total = len(launches)
        self.hcas = inputs.get("hcas")
        self.model = {launch["name"]: (launch_kind(launch),) + tuple(launch_parts(
            launch, inputs.get("gpus_per_node") or 0, self.hcas)) + (self.shape(launch),) for launch in launches}
        self.remaining = dict(self.model)
        self.measured = []
        self.start = time.monotonic()
        self.done = 0
        self.stream = stream
        self.outlook = outlook

    def shape(self, launch):
        """work_shape of a coll_perf launch (its work by size), None for the others."""
        return work_shape(launch, self.hcas) if launch.get("kind") in TWO_PASS_KINDS else None

    def eta_s(self):
        """The seconds left by the calibrated model, or None before any launch completed."""
        left_out, pending_s = self.outlook(list(self.remaining)) if self.outlook else (set(), 0.0)
        left = calibrated_eta(self.measured, [model for name, model in self.remaining.items() if name not in left_out])
        return None if left is None else left + pending_s + self.report_s

    @staticmethod
    def clock(seconds):
        seconds = int(round(seconds))
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s" if seconds >= 3600 else \
            f"{seconds // 60}m{seconds % 60:02d}s"

    def report(self, launch, status, seconds, detail="", work_s=None, records=None):
        """work_s: the part of `seconds` its ranks reported as work (execute/progress.LaunchProgress.work_s), else
        None; records: the case records it wrote (its collectives' measured times: plan/estimate.measured_shape)."""
        self.done += 1
        modelled = self.remaining.pop(launch["name"], None)
        if status == "complete" and seconds is not None and modelled is not None:
            shape = measured_shape(launch, records, work_s, self.hcas) if records else None
            self.measured.append(modelled[:3] + (seconds, work_s, shape))
        elapsed = time.monotonic() - self.start
        left = self.eta_s()
        eta = "-" if left is None else self.clock(left)
        took = "skipped (already complete)" if seconds is None else \
            (status if status == "not run" else f"{status} in {seconds:.1f}s")
        line = f"cclbench: [{self.done}/{self.total}] {launch['name']}: {took}; elapsed {self.clock(elapsed)}, ETA {eta}"
        if detail:
            line += f" ({detail})"
        print(line, file=self.stream, flush=True)


class Baseline:
    def __init__(self, inputs, run_dir, resume, verbose=False, argv=None, launches=None, mode=None):
        self.inputs = inputs
        self.run_dir = os.path.abspath(run_dir)
        self.resume = resume
        self.verbose = verbose
        self.argv = argv or []
        self.launches = launches if launches is not None else Planner(inputs, run_dir).build()
        self.mode = mode
        self.manifest = None
        self.log = None
        self.child = None
        self.interrupted_by = None
        self.binding_choices = {}  # decode point over the rails -> the binding chosen for it (apply_binding)
        self.doctor_paths = None  # the paths between hosts the doctor failed, once every doctor launch ran
        self.doctor_document = None  # doctor.json once every doctor launch ran: the hosts' rails and RDMA ports
        # The run learns from a failed launch (rules/dead_paths.py): a launch across hosts that failed as a dead path
        # fails leaves a suspicion ({"after", "hosts", "why"}); before the next launch over those hosts the paths
        # between them are checked again (path_checker: execute/doctor.recheck_paths), and what the checks saw is
        # kept (run_observations): a launch that needs a path found dead is not run.
        self.path_checker = recheck_paths
        self.path_suspect = None
        self.run_observations = []
    # -- manifest (execute/manifest.py) -----------------------------------------------------------
    def manifest_path(self):
        return manifest_path(self.run_dir)

    def save_manifest(self):
        # The plan as it stands: apply_binding rebuilds the commands of decode points over the rails at run time.
        save_manifest(self.run_dir, self.manifest, self.launches)

    # -- logging --------------------------------------------------------------------------------
    def log_line(self, text):
        if self.log:
            self.log.write(text.rstrip("\n") + "\n")

    # -- the run --------------------------------------------------------------------------------
    def prepare(self):
        if self.resume:
            self.manifest = read_json(self.manifest_path(), "run manifest")
            if not isinstance(self.manifest, dict) or not isinstance(self.manifest.get("points"), dict):
                raise CclbenchError(f"{self.manifest_path()} is not a cclbench run manifest", 2)
            planned = {launch["name"] for launch in self.launches}
            for name in planned - set(self.manifest["points"]):
                self.manifest["points"][name] = pending_point(None)
            for launch in self.launches:
                self.manifest["points"][launch["name"]]["kind"] = launch["kind"]
            # A decode point over the rails keeps the binding chosen when it first ran: its repeats, probe and
            # A/B variants all run with one binding.
            for entry in self.manifest.get("plan") or []:
                chosen = (entry.get("binding") or {}).get("chosen") if isinstance(entry, dict) else None
                if isinstance(chosen, dict) and isinstance(chosen.get("env"), dict):
                    self.binding_choices.setdefault(entry["binding"].get("point"), chosen)
            for launch in self.launches:
                if launch.get("binding") and launch["binding"]["point"] in self.binding_choices:
                    self.apply_binding(launch)
            self.manifest["status"] = "running"
        else:
            self.manifest = new_manifest(self.inputs, self.launches, self.run_dir, self.mode)
        self.manifest["invocations"].append({"argv": self.argv, "started_utc": utc_now(), "resume": self.resume})
        for name in (CASES_FILE, SANITY_FILE):
            terminate_last_line(os.path.join(self.run_dir, name))
        for sub in ("doctor", "topology", "p2p", "nccl", "raw", "tuning", "smoke"):
            make_dirs(os.path.join(self.run_dir, sub))  # 0755 and no symlinks, whatever the umask
        self.save_manifest()
        self.log = open_append(os.path.join(self.run_dir, "run.log"))
        self.log_line(f"# {utc_now()} cclbench {'resume' if self.resume else 'baseline'}: {shlex.join(self.argv)}")
        for note in mode_notes(self.inputs):
            self.log_line(f"# note: {note}")

    def check_outputs(self, launch):
        return launch_outputs(self.run_dir, launch)

    def already_complete(self, launch):
        state = self.manifest["points"].get(launch["name"], {})
        if not self.resume or state.get("status") != "complete" or launch["kind"] in ("sanity", "doctor"):
            return False
        ok, _ = self.check_outputs(launch)
        return ok

    def execute(self, launch):
        """Runs one launch, its output into run.log. Returns (exit code, problem starting it). The launch is
        bounded (plan/bounds.py: derived from the plan, --launch-timeout overrides): past it, its whole process
        group is stopped (stop_child) and the exit is TIMEOUT_EXIT."""
        self.log_line(f"# {utc_now()} launch {launch['name']}")
        argv = self.runnable_argv(launch)
        env = dict(os.environ)
        for name in TEST_KNOB_VARIABLES:  # a test knob reaches a launch only where the plan put it (smoke's tests)
            env.pop(name, None)
        env.update(launch.get("env") or {})
        argv, steered = self.steer_off_dead_rails(launch, argv, env)
        env.update(steered)
        self.log_line("$ " + shlex.join(argv) + "".join(f" [{name}={value}]" for name, value in steered.items()))
        timeout = self.launch_bound(launch)
        timed_out = threading.Event()
        self.first_lines = []  # the launcher's own words when a launch fails (doctor: host unreachable)
        self.watchdog_lines = []  # coll_perf's watchdog messages: the case that hung
        self.ended_by_bound = False
        self.hang = None  # where a launch that stopped reporting hung (execute/progress.py)
        # A tool planned with --progress reports each phase with its deadline: past the latest one plus a grace
        # the launch is stopped, whatever froze (execute/progress.py). The bound stays as a last resort.
        self.progress = LaunchProgress(start_allowance_s(launch.get("hosts"))) if watches_progress(argv) else None
        try:
            # Its own process group: a stop reaches mpirun and everything it started on this host (ssh to the
            # other hosts included), and nothing of it outlives the launch.
            self.child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        except OSError as error:
            self.log_line(f"# cannot start: {error.strerror}")
            return None, f"cannot start {launch['argv'][0]}: {error.strerror}"
        child = self.child
        started = time.monotonic()
        reader = threading.Thread(target=self.read_output, args=(child.stdout,), daemon=True)
        reader.start()
        try:
            code = self.wait_watching(launch, child, started, timeout, timed_out)
            if timed_out.is_set() or self.hang is not None or self.interrupted_by:
                signal_group(child, signal.SIGKILL)  # what the launcher left behind in its group, if anything
            reader.join(OUTPUT_CLOSE_GRACE_S)
            if reader.is_alive():
                self.log_line(f"# the output of {launch['name']} stayed open {OUTPUT_CLOSE_GRACE_S}s after it "
                              f"exited: not read further")
        finally:
            self.child = None
        self.log_line(f"# {utc_now()} exit {code}")
        self.ended_by_bound = timed_out.is_set()
        if self.hang is not None and not self.interrupted_by:
            return TIMEOUT_EXIT, f"launch stopped: no progress past its deadline ({self.hang['deadline_s']:.0f} s, " \
                                 f"learned from the run, + {PROGRESS_GRACE_S} s grace)"
        if timed_out.is_set():
            given = self.inputs.get("launch_timeout_s")
            why = f"--launch-timeout {given:g}s" if given else f"its bound {timeout:g}s (derived from the plan; " \
                                                             f"--launch-timeout overrides)"
            return TIMEOUT_EXIT, f"launch exceeded {why}"
        if self.interrupted_by:
            raise Interrupted(self.interrupted_by)
        return code, None

    def wait_watching(self, launch, child, started, bound_s, timed_out):
        """Waits for the launcher, once a second checking its progress (a launch with nothing reported past its
        deadline plus a grace is stopped, and where it hung is kept in self.hang) and its bound."""
        while True:
            try:
                return child.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            if self.hang is not None or timed_out.is_set():
                continue  # already stopping it
            now = time.monotonic()
            if self.progress is not None and self.progress.expired(now):
                self.hang = dict(self.progress.describe(now, expected_ranks=self.expected_processes(launch)),
                                 deadline_s=self.progress.largest_deadline_s())
                self.log_line(f"# {utc_now()} {launch['name']}: no progress past its deadline: {self.hang['text']}; "
                              f"stopping it")
                self.stop_child()
            elif now - started >= bound_s:
                timed_out.set()
                self.log_line(f"# {utc_now()} {launch['name']} passed its bound of {bound_s:g}s: stopping it")
                self.stop_child()

    @staticmethod
    def expected_processes(launch):
        """The processes of a coll_perf launch (one per rank, or per -g GPUs), None for other tools."""
        argv = launch.get("argv") or []
        if not any(word.rsplit("/", 1)[-1] == "coll_perf" for word in argv):
            return None
        gpus = int(argv[argv.index("-g") + 1]) if "-g" in argv[:-1] and argv[argv.index("-g") + 1].isdigit() else 1
        return max(1, (launch.get("nranks") or 1) // max(1, gpus))

    def read_output(self, stream):
        """The launch's output line by line into run.log (and stderr with --verbose); runs on its own thread so
        that waiting for the launcher stays bounded."""
        for raw in stream:
            line = raw.decode("utf-8", "replace")
            if self.progress is not None and self.progress.feed(line):
                continue  # progress lines are the runner's, not the log's
            self.log_line(line)
            if len(self.first_lines) < 60:
                self.first_lines.append(line)
            found = WATCHDOG_LINE.search(line)
            if found and len(self.watchdog_lines) < 8:
                self.watchdog_lines.append(found)
            if self.verbose:
                sys.stderr.write(line)

    def launch_bound(self, launch):
        """Seconds a launch may run: --launch-timeout, else the plan's bound for it (plan/bounds.py), computed
        again for plans stored before launches carried one."""
        return self.inputs.get("launch_timeout_s") or launch.get("bound_s") or \
            launch_bounds(launch["kind"], launch["argv"], launch.get("nranks") or 1)["bound_s"]

    def records_file(self, launch):
        argv = launch.get("argv") or []
        return argv[argv.index("--jsonl") + 1] if "--jsonl" in argv[:-1] else None

    def hang_detail(self, launch, records_from):
        """Where a timed-out launch hung: coll_perf's watchdog message (the case, size, phase, rank and host),
        else the last case its records finished (the hang is in the one after it); then the doctor's fail
        findings for its hosts."""
        parts = []
        if self.hang is not None:
            parts.append(f"the runner stopped it, no progress reported past its deadline: {self.hang['text']}")
        if self.watchdog_lines:
            found = self.watchdog_lines[0]
            parts.append(f"coll_perf's watchdog: {found.group(1)} did not finish within {found.group(2)} s"
                         + (f" (learned deadline: {found.group(3)}" if found.group(3) else ""))
            if self.progress is not None and self.progress.ranks:
                who = self.progress.describe(expected_ranks=self.expected_processes(launch))["who"]
                if who:
                    parts.append(who)
        path = self.records_file(launch)
        # Where coll_perf's watchdog did not speak, its records tell only when the runner's bound ended the launch
        # (an exit 4 of coll_perf's own, such as NCCL refusing a forced setting, hung nowhere).
        if path and (self.watchdog_lines or self.ended_by_bound or self.hang is not None):
            done = [record.get("case_id") for record in self.new_records(launch, records_from)]
            if done:
                parts.append(f"{len(done)} case(s) finished before it, the last {done[-1]}: the hang is in the "
                             f"case after it")
            elif not self.watchdog_lines and self.hang is None:
                parts.append("no case finished: it hung starting up or in its first case")
        document, _ = load_run_doctor(self.run_dir)
        findings = host_findings(document.get("checks") if isinstance(document, dict) else [], launch.get("hosts"))
        if findings:
            parts.append(f"the doctor found on {', '.join(launch.get('hosts') or [])}: {quoted(findings)}")
        return f"point {launch['name']}: " + "; ".join(parts) if parts else ""

    def apply_binding(self, launch):
        """A decode point over the rails (and its probe and A/B variants) runs with the binding the sweep found
        best at its sizes, chosen once from the records measured before it (choose_binding): its
        environment and launcher prefix are rebuilt with that binding, and the plan in the manifest says so."""
        rule = launch["binding"]
        choice = self.binding_choices.get(rule["point"])
        if choice is None:
            path = cases_path(self.run_dir)
            records = load_cases(path, "case records")[0] if os.path.exists(path) else []
            base, env, reason = choose_binding(records, sweep_bindings(self.launches), rule["collective"],
                                                      rule["sizes"], rule["production_env"])
            choice = {"from": base, "env": env, "reason": reason}
            self.binding_choices[rule["point"]] = choice
            self.log_line(f"# {rule['point']}: binding {base or variant_text(env)}: {reason}")
        env = dict(choice["env"], **((launch.get("ab") or {}).get("variant") or {}))
        old_prefix = launcher.command(self.inputs, launch["nranks"], rule["host_spec"], launch.get("env") or {})
        if launch["argv"][:len(old_prefix)] != old_prefix:
            raise CclbenchError(f"{launch['name']}: its command does not start with the launcher prefix its binding "
                                f"rule expects; re-plan the run", 2)
        launch["argv"] = launcher.command(self.inputs, launch["nranks"], rule["host_spec"], env) + \
            launch["argv"][len(old_prefix):]
        launch["env"] = env
        rule["chosen"] = choice

    def steer_off_dead_rails(self, launch, argv, env):
        """An NCCL launch across hosts after the doctor or the run's path check found a path between its hosts dead:
        its own MPI traffic (coll_perf's bootstrap and result exchange) kept off the dead interfaces
        (rules/dead_paths.steer_mpi_traffic), so that a point bound to a live rail alone runs. The launch's needs
        (needed_rails) already left out every launch whose NCCL traffic needs a dead path; the MPI backend's own
        traffic is its measurement (needed_rails counts it). Returns (argv, environment changes); the manifest's point
        says what was changed (mpi_steered)."""
        if _is_mpi(launch, ()) or not crosses_hosts(launch):
            return argv, {}
        paths = failed_run_paths(self.run_observations) + list(self.doctor_paths or [])
        dead = dead_netdevs(launch.get("hosts"), paths)
        if not dead:
            return argv, {}
        steered = steer_mpi_traffic(argv, env, dead, self.doctor_document)
        state = self.manifest["points"][launch["name"]]
        if steered is None:
            words = (f"Open MPI's TCP traffic has only dead interfaces ({', '.join(dead)}) to use: left as it is, "
                     "the launch may hang on it")
            self.log_line(f"# {launch['name']}: {words}")
            state["mpi_steered"] = words
            return argv, {}
        argv, changes, words = steered
        if words:
            self.log_line(f"# {launch['name']}: {words}")
            state["mpi_steered"] = words
            self.save_manifest()
        return argv, changes

    def runnable_argv(self, launch):
        """The planned argv, less `--tuning-from FILE` when its probe left no usable file: the timed run
        still measures, its records then say the tuning is missing (and run.log says why)."""
        argv = list(launch["argv"])
        source = launch.get("tuning_from")
        if source and "--tuning-from" in argv:
            try:
                document = read_json(source, "tuning probe result")
                usable = isinstance(document, dict) and document.get("kind") == "tuning_probe"
            except CclbenchError:
                usable = False
            if not usable:
                index = argv.index("--tuning-from")
                del argv[index:index + 2]
                self.log_line(f"# {source} is missing or unusable (its probe failed): measuring without --tuning-from")
        return argv

    def stop_child(self):
        """SIGCONT and SIGTERM to the launcher's whole process group now (mpirun forwards SIGTERM to the ranks;
        SIGCONT first, because a stopped process holds a SIGTERM until it runs again), SIGKILL to the group
        STOP_GRACE_S later if the launcher is still there. Never waits here: this also runs inside a signal
        handler while the main thread waits."""
        child = self.child
        if child and child.poll() is None:
            signal_group(child, signal.SIGCONT)
            signal_group(child, signal.SIGTERM)

            def escalate():
                if child.poll() is None:
                    self.log_line(f"# {utc_now()} the launcher outlived SIGTERM by {STOP_GRACE_S}s: SIGKILL to its "
                                  f"process group")
                    signal_group(child, signal.SIGKILL)
            killer = threading.Timer(STOP_GRACE_S, escalate)
            killer.daemon = True
            killer.start()

    def on_signal(self, signum, _frame):
        self.interrupted_by = signum
        self.stop_child()
        if self.child is None:
            raise Interrupted(signum)

    def run_launch(self, launch, progress):
        state = self.manifest["points"][launch["name"]]
        if self.already_complete(launch):
            progress.report(launch, "complete", None)
            self.log_line(f"# {utc_now()} skip {launch['name']}: complete and its records parse")
            return True
        if launch.get("binding"):
            self.apply_binding(launch)
        state.pop("skipped_by", None)  # left out by the doctor on an earlier attempt, run now
        state.pop("work_s", None)  # an earlier attempt's
        state.pop("mpi_steered", None)
        state.update(status="running", attempts=state.get("attempts", 0) + 1, started_utc=utc_now(),
                     finished_utc=None, exit_code=None, reason=None, elapsed_s=None)
        self.save_manifest()
        self.progress = None  # execute's watch of this launch, when its tool reports progress
        started = time.monotonic()
        records = self.records_file(launch)
        records_from = os.path.getsize(records) if records and os.path.isfile(records) else 0
        try:
            code, start_problem = self.execute(launch)
        except Interrupted as interrupt:
            state.update(status="interrupted", finished_utc=utc_now(), elapsed_s=round(time.monotonic() - started, 3),
                         reason=f"interrupted by {signal_name(interrupt.signum)}")
            self.save_manifest()
            raise
        elapsed = time.monotonic() - started
        ok, reason = (False, start_problem) if start_problem else self.check_outputs(launch)
        if code == 1 and launch["kind"] == "doctor" and ok:
            code = 0  # the doctor found a failing check: a finding for doctor.json and the report, not a broken launch
        if code != 0 and not start_problem:
            meaning = EXIT_MEANINGS.get(code) or exit_meaning(code)
            reason = f"exit {code} ({meaning})" + (f"; {reason}" if reason else "")
            words = launcher.launch_error_lines("".join(getattr(self, "first_lines", [])))
            # The doctor's failures, and any exit no tool of ours gives and no signal explains (the launcher's
            # own: 243 when it cannot reach a host, 255 from ssh): the launcher's first words, not only in run.log.
            if words and (launch["kind"] == "doctor" or (code not in EXIT_MEANINGS and
                                                         exit_meaning(code) == "unexpected exit status")):
                reason += "; the launcher said: " + " / ".join(line[:200] for line in words)
            ok = False
        if code == TIMEOUT_EXIT:
            # The launch's bound or coll_perf's watchdog ended it: name the point and the case, and what the
            # doctor found on its hosts.
            detail = self.hang_detail(launch, records_from)
            reason = f"{reason}; {detail}" if detail else reason
            self.log_line(f"# {utc_now()} {launch['name']} timed out: {reason}")
            ok = False
        status = "complete" if ok else "failed"
        # Its work as its ranks reported it (first case phase entered to the last left): the rest of its wall time
        # was start-up and teardown. The ETA calibrates the two apart from it (plan/estimate.calibrated_eta).
        work = self.progress.work_s() if self.progress is not None else None
        state.update(status=status, exit_code=code, reason=reason, finished_utc=utc_now(),
                     elapsed_s=round(elapsed, 3), work_s=None if work is None else round(work, 3))
        self.save_manifest()
        if not ok:
            self.note_failure(launch)  # before its line: the ETA leaves out what a dead path would (eta_outlook)
            self.settle_before_line(launch)
        progress.report(launch, status, elapsed, reason or "", work_s=work,
                        records=self.new_records(launch, records_from) if ok else None)
        return ok

    def new_records(self, launch, records_from):
        """The case records of this launch's point that it appended to its records file (from byte records_from on);
        [] when none or unreadable (the ETA then calibrates without them)."""
        path = self.records_file(launch)
        if not path or not os.path.isfile(path):
            return []
        found = []
        try:
            with open(path, "rb") as handle:
                handle.seek(records_from)
                for line in handle:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict) and record.get("point") == launch["name"]:
                        found.append(record)
        except OSError:
            return []
        return found

    def check_gpu_count(self, launch):
        """After topology: the node must have the GPUs the plan puts on it."""
        planned = self.inputs["gpus_per_node"]
        if not self.inputs["hosts"]:
            return
        try:
            model = read_json(launch["outputs"][0], "topology")
        except CclbenchError:
            return
        gpus = model.get("gpus") if isinstance(model, dict) else None
        if not planned:
            if isinstance(gpus, list) and gpus:  # GPU-less plan (none found where cclbench runs): say what it misses
                note = (f"host {launch['hosts'][0]} has {len(gpus)} GPU(s), but no GPU was found where cclbench runs: "
                        f"this run is the MPI backend, correctness only; pass --gpus-per-node {len(gpus)} for the NCCL plan")
                self.log_line(f"# note: {note}")
                print(f"cclbench: note: {note}", file=sys.stderr, flush=True)
            return
        if isinstance(gpus, list) and len(gpus) != planned:
            raise CclbenchError(f"host {launch['hosts'][0]} has {len(gpus)} GPU(s) but --gpus-per-node is {planned}", 2)

    def merge_doctor(self, launch):
        """doctor/<host>.json -> doctor.json after each doctor launch; one stderr line with the verdict."""
        hosts = [launch["hosts"][0] for launch in self.launches if launch["kind"] == "doctor"]
        failures = {}
        for point in self.launches:
            state = self.manifest["points"].get(point["name"]) or {}
            if point["kind"] == "doctor" and state.get("status") == "failed" and state.get("reason"):
                failures[point["hosts"][0]] = f"no doctor result from {point['hosts'][0]}: {state['reason']}"
        done = all(os.path.exists(os.path.join(self.run_dir, "doctor", f"{host}.json")) for host in hosts)
        last = [point for point in self.launches if point["kind"] == "doctor"][-1]
        if done and len(hosts) > 1 and launch is last:
            path_mtu_run_directory(self.run_dir, hosts, self.inputs, log=self.log_line)
        document = merge_run_directory(self.run_dir, hosts, failures)
        if launch is last:
            self.doctor_paths = failed_paths((document or {}).get("checks"))
            self.doctor_document = document
        if document and done:
            counts = document["summary"]
            print(f"cclbench: doctor: {document['status']} ({counts['fail']} fail, {counts['warn']} warn, "
                  f"{counts['skip']} skip): {os.path.join(self.run_dir, 'doctor.json')}", file=sys.stderr, flush=True)

    def needs(self, launch):
        """The rails a launch across hosts sends over (rules/dead_paths.needed_rails; None: any of them)."""
        return needed_rails(launch, self.manifest.get("env") if self.manifest else None, self.doctor_document)

    def blocked_by_doctor(self, launch):
        """Why the doctor's findings leave this launch out (rules/doctor_gate.py), or None: only once every
        doctor launch has run, only across hosts and a failed path on a rail it may use, never with
        --run-despite-doctor."""
        if self.inputs.get("run_despite_doctor") or launch["kind"] == "doctor" or self.doctor_paths is None:
            return None
        crossed = paths_needed(launch.get("hosts"), self.needs(launch),
                               paths_crossed(launch.get("hosts"), self.doctor_paths))
        return not_run_reason(crossed) if crossed else None

    def blocked_by_run_paths(self, launch):
        """Why the run's own path checks leave this launch out (a path it needs found dead, or one of its hosts
        unreachable since), or None."""
        if self.inputs.get("run_despite_doctor") or launch["kind"] == "doctor" or not self.run_observations:
            return None
        unreached = {host: words for host, words in unreached_hosts(self.run_observations).items()
                     if host in (launch.get("hosts") or [])}
        crossed = paths_needed(launch.get("hosts"), self.needs(launch), failed_run_paths(self.run_observations))
        return run_not_run_reason(crossed, unreached, self.run_observations) if crossed or unreached else None

    def blocked(self, launch):
        """(why, by) when a launch is not run: the doctor ('doctor') or the run's own path check ('path_check')
        found a path it needs dead. A pending suspicion is settled first when this launch needs its hosts."""
        if launch["kind"] == "doctor":
            return None
        self.settle_paths(launch)
        why = self.blocked_by_doctor(launch)
        if why:
            return why, "doctor"
        why = self.blocked_by_run_paths(launch)
        return (why, "path_check") if why else None

    def eta_outlook(self, names):
        """For the ETA (Progress): which of the launches still to run (names) will not run, and the seconds of a
        pending path check. Left out: what the doctor's or the run's path checks already leave out, and, while a
        check is pending after a launch that failed as a dead path fails, every launch across hosts sharing a host
        with it - the check, seconds away, leaves those out when the path is dead, the commonest cause of such a
        failure (on the 2-core VM the ETA said 58 s with 5.5 s left, after inter.mpi hung on node2's dead rails).
        A hang on live paths: the ETA is short by those launches until the next line. After a failed sanity pass
        nothing else runs."""
        by_name = {launch["name"]: launch for launch in self.launches}
        suspect = self.path_suspect
        pending_s = PATH_CHECK_S if suspect else 0.0
        points = (self.manifest or {}).get("points") or {}
        if any(launch["kind"] == "sanity" and (points.get(launch["name"]) or {}).get("status") == "failed"
               for launch in self.launches):
            return set(names), pending_s  # a failed sanity pass ends the run (sanity_failed)
        left_out = set()
        for name in names:
            launch = by_name.get(name)
            if launch is None or launch["kind"] == "doctor":
                continue
            if suspect and crosses_hosts(launch) and set(launch.get("hosts") or []) & set(suspect["hosts"]):
                left_out.add(name)
            elif self.blocked_by_doctor(launch) or self.blocked_by_run_paths(launch):
                left_out.add(name)
        return left_out, pending_s

    def note_failure(self, launch):
        """A launch across hosts that failed as a dead path fails (rules/dead_paths.may_be_a_path) leaves a suspicion
        on its hosts, settled before the next launch that needs one of them (settle_paths)."""
        state = self.manifest["points"][launch["name"]]
        if not may_be_a_path(launch, state.get("exit_code")):
            return
        if self.path_suspect is None:
            self.path_suspect = {"after": launch["name"], "hosts": list(launch["hosts"]), "why": state.get("reason")}
        else:
            self.path_suspect["hosts"] += [h for h in launch["hosts"] if h not in self.path_suspect["hosts"]]

    def settle_before_line(self, launch):
        """After `launch` failed as a dead path fails: when the launch after it in the plan needs its hosts, the path
        check that launch would make first (settle_paths) is made now, before the failed launch's progress line, so
        that its ETA knows what the check found: with one rail of two dead the other rail's launch still runs (left
        out pending the check, the ETA said 5 s with 28 s left on the 2-core VM). The same check at the same point
        of the run, its line a check later; a launch on one host next still runs before the check. Not after a
        failed sanity pass: nothing else runs (sanity_failed makes its check)."""
        if self.path_suspect is None or launch["kind"] == "sanity":
            return
        names = [item["name"] for item in self.launches]
        following = self.launches[names.index(launch["name"]) + 1:] if launch["name"] in names else []
        if following:
            self.settle_paths(following[0])

    def settle_paths(self, launch=None):
        """The pending suspicion's path check, before `launch` when it is a launch across hosts sharing one of the
        suspect's hosts (a launch on one host needs no path and runs first), or at the end of the run (launch None):
        one check per failed launch, bounded to seconds; what it saw joins run_observations."""
        suspect = self.path_suspect
        if suspect is None:
            return
        if launch is not None and not (set(launch.get("hosts") or []) & set(suspect["hosts"]) and
                                       crosses_hosts(launch)):
            return
        self.path_suspect = None
        order = list(self.inputs.get("hosts") or [])
        hosts = sorted(set(suspect["hosts"]), key=lambda host: order.index(host) if host in order else len(order))
        self.log_line(f"# {utc_now()} path check after {suspect['after']} failed: the paths between {', '.join(hosts)}")
        started = time.monotonic()
        try:
            entry = self.path_checker(self.run_dir, hosts, self.inputs, suspect["after"], suspect["why"],
                                      invocation=len(self.manifest["invocations"]), log=self.log_line)
        except (CclbenchError, OSError) as error:
            entry, problem = None, str(error)
        else:
            problem = None if entry is not None else "no path to probe (no doctor addresses, a fixture root)"
        if entry is None:
            self.log_line(f"# path check not made: {problem}")
            return
        seen = observe(entry["checks"], "run", suspect["after"])
        self.run_observations += seen
        dead = [fault_subject(fault) for fault in attribute(self.run_observations)
                if fault.get("found_after") == suspect["after"]]
        failed = [item for item in seen if item["state"] not in ("alive", "unknown")]
        text = (f"path check after {suspect['after']} failed: {len(seen)} path(s) between {', '.join(hosts)} in "
                f"{time.monotonic() - started:.1f}s, " + (f"dead: {'; '.join(dead)}" if dead else
                                                          f"{len(failed)} failed" if failed else "all alive"))
        self.log_line(f"# {utc_now()} {text}")
        print(f"cclbench: {text}", file=sys.stderr, flush=True)

    def skip_launch(self, launch, reason, progress, by="doctor"):
        """A launch the doctor's findings (by 'doctor') or the run's own path check ('path_check') leave out:
        'skipped' in the manifest with the reason, in run.log and on stderr; the report and the verdict name it
        (launch.not_run, launch.not_run_dead_path)."""
        state = self.manifest["points"][launch["name"]]
        state.pop("work_s", None)
        state.update(status="skipped", skipped_by=by, exit_code=None, reason=reason, started_utc=None,
                     finished_utc=utc_now(), elapsed_s=None)
        self.save_manifest()
        self.log_line(f"# {utc_now()} skip {launch['name']}: {reason}")
        progress.report(launch, "not run", 0.0, reason)

    def sanity_failed(self, launch, reason):
        """A failed sanity pass ends the run. One across hosts that failed as a dead path fails (a path that died
        after the doctor's check, e.g. between the launch's bootstrap and its connect: it hangs connecting) gets its
        path check first, so that the verdict names the dead path (path.dead, 'sanity first met it') and the error
        leads with it. Returns the error to raise."""
        self.note_failure(launch)
        self.settle_paths()
        self.finish("failed")
        verdict = self.write_report()
        dead = [item for item in (verdict or {}).get("reasons") or [] if item["code"] == PATH_DEAD]
        lead = f"{reason_text(dead[0])}; " if dead else ""
        return CclbenchError(f"{lead}sanity pass failed, nothing else was run: {reason} "
                             f"(see {os.path.join(self.run_dir, 'run.log')})"
                             + ("" if dead or "the doctor found on" in (reason or "") else self.doctor_diagnosis()))

    def doctor_diagnosis(self):
        """What the doctor already found that explains a hung or failed sanity pass (a path MTU
        mismatch hangs NCCL's init): '; the doctor found: ...' or ''."""
        document, _ = load_run_doctor(self.run_dir)
        findings = path_mtu_findings(document.get("checks") or []) if isinstance(document, dict) else []
        if not findings:
            return ""
        more = f" (and {len(findings) - 1} more path(s))" if len(findings) > 1 else ""
        return f"; the doctor found a path MTU mismatch: {findings[0]}{more}"

    def write_summary(self):
        path = cases_path(self.run_dir)
        records = load_cases(path, "case records")[0] if os.path.exists(path) else []
        write_summary_csv(os.path.join(self.run_dir, "summary.csv"), records)
        return records

    def run(self):
        self.prepare()
        progress = Progress(self.launches, inputs=self.inputs, outlook=self.eta_outlook,
                            report_s=report_seconds(plots_expected()))
        failures = []
        old_int = signal.signal(signal.SIGINT, self.on_signal)
        old_term = signal.signal(signal.SIGTERM, self.on_signal)
        not_run = []
        try:
            for launch in self.launches:
                blocked = self.blocked(launch)
                if blocked:
                    self.skip_launch(launch, blocked[0], progress, by=blocked[1])
                    not_run.append(f"{launch['name']}: {blocked[0]}")
                    continue
                ok = self.run_launch(launch, progress)
                if launch["kind"] == "topology" and ok:
                    self.check_gpu_count(launch)
                if launch["kind"] == "doctor":
                    self.merge_doctor(launch)
                if not ok:
                    reason = self.manifest["points"][launch["name"]]["reason"]
                    if launch["kind"] == "sanity":
                        raise self.sanity_failed(launch, reason)
                    if launch.get("ab"):
                        # A forced NCCL_* variant NCCL refuses is an A/B finding (the report names it with
                        # NCCL's words), not a broken baseline.
                        self.log_line(f"# {launch['name']}: --ab variant not measured: {reason}")
                        continue
                    failures.append(f"{launch['name']}: {reason}")
            # A launch across hosts that failed last: its paths are checked once more, so that the verdict can
            # name a dead path.
            self.settle_paths()
        except Interrupted as interrupt:
            raise self.stopped(interrupt.signum) from None  # the handlers stay ours while the verdict is written
        except CclbenchError:
            if self.manifest and self.manifest["status"] == "running":
                self.finish("failed")
            raise
        finally:
            signal.signal(signal.SIGINT, old_int)
            signal.signal(signal.SIGTERM, old_term)
        verdict, not_reproducible = self.conclude(failed=bool(failures or not_run))
        # A dead path is the cause: the verdict names it first, before the launches it hung or left out.
        dead = [reason for reason in (verdict or {}).get("reasons") or [] if reason["code"] == PATH_DEAD]
        lead = f"{headline(verdict)}: " if verdict else ""
        if dead:
            lead += f"{reason_text(dead[0])}" + (f" (and {len(dead) - 1} more dead path(s))" if len(dead) > 1 else "") \
                + "; "
        if not_run:
            # The doctor's finding is the cause: it comes first, before any launch that failed for it.
            name, _, why = not_run[0].partition(": not run: ")
            hung = f"{len(failures)} launch(es) failed, first {failures[0]}; " if failures else ""
            raise CclbenchError(f"{lead}{hung}{len(not_run)} launch(es) across hosts not run, first {name}: {why}; see "
                                f"{os.path.join(self.run_dir, 'run.log')}")
        if failures:
            more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
            raise CclbenchError(f"{lead}{len(failures)} launch(es) failed: "
                                f"{failures[0]}{more}; see {os.path.join(self.run_dir, 'run.log')}")
        if verdict is None and not_reproducible:
            first = not_reproducible[0]
            raise CclbenchError(f"{len(not_reproducible)} point(s) not reproducible across repeats, first "
                                f"{first['point']} ({first['code']})")
        if verdict is not None and verdict["overall"] == FAILED:
            raise CclbenchError(console_line(verdict, self.run_dir, prefix=""))
        print(console_line(verdict, self.run_dir) if verdict else f"cclbench: run complete: {self.run_dir}",
              file=sys.stderr)
        return 0

    def conclude(self, failed, stopped_by=None):
        """The end of every run that got past its start, failed and interrupted ones included: summary.csv, the
        repeatability gate into the manifest, the manifest's last status (stopped_by, a signal's name: 'interrupted';
        else 'failed' when failed or a point is not reproducible, else 'complete'), then report.md and verdict.json
        (write_report). Returns (the verdict or None, the points not reproducible)."""
        records = self.write_summary()
        # The repeatability gate (rules/repeatability.py): a point fails only when its spread is systematic.
        judged = judge_repeatability(records, self.inputs["cv_gate_pct"]) if self.inputs["repeat"] > 1 else {}
        self.manifest["gates"]["repeatability"] = [
            {"point": base, "status": point["status"], "code": point["code"], "judged_cases": point["judged_cases"],
             "median_cv_pct": round(point["median_cv_pct"], 3), "cases_above_target": point["cases_above_target"],
             "cases_above_gate": point["cases_above_gate"]} for base, point in judged.items()]
        not_reproducible = [item for item in self.manifest["gates"]["repeatability"] if item["status"] == FAIL]
        if stopped_by:
            status = "interrupted"
        else:
            status = "failed" if failed or not_reproducible else "complete"
        self.finish(status, stopped_by)
        return self.write_report(), not_reproducible

    def stopped(self, signum):
        """SIGINT or SIGTERM stopped the run: the launch it hit was ended and marked 'interrupted' (run_launch; one
        still 'running', hit between two steps, is marked here), the points not reached stay 'pending' for
        --resume. What was measured is then judged as at the end of any run (conclude), and the verdict says the
        run was interrupted before its plan completed and what it did not run (rules/anomalies.py: run.interrupted,
        a fail). A second signal meanwhile ends that (files are written atomically: each is the old one or the new
        one, never half of one). Returns the error to raise: exit 130 (SIGINT) or 143 (SIGTERM), its line where the
        verdict is and how to resume."""
        name = signal_name(signum)
        code = 130 if signum == signal.SIGINT else 143
        resume = f"resume with: cclbench baseline --resume {os.path.basename(self.run_dir)}"
        for state in self.manifest["points"].values():
            if state.get("status") == "running":
                state.update(status="interrupted", finished_utc=utc_now(), reason=f"interrupted by {name}")
        try:
            verdict, _ = self.conclude(failed=True, stopped_by=name)
        except (Interrupted, CclbenchError) as problem:
            if self.manifest["status"] == "running":
                self.finish("interrupted", name)
            why = f"a second signal ({signal_name(problem.signum)})" if isinstance(problem, Interrupted) else problem
            return CclbenchError(f"interrupted by {name}; verdict not written: {why} (write it with: cclbench report "
                                 f"{self.run_dir}); {resume}", code)
        said = f"{headline(verdict)}, verdict: {os.path.join(self.run_dir, 'verdict.json')}" if verdict else \
            "verdict not written (see above)"
        return CclbenchError(f"interrupted by {name} before the plan completed; {said}; {resume}", code)

    def write_report(self):
        """report.md, verdict.json (and plots) at the end of every run, failed and interrupted ones included: their
        verdict is what the reader needs first. A report problem never hides the run's outcome.
        Returns the verdict (rules/verdict.py), None when the report could not be written."""
        try:
            path, anomalies, verdict = build_report(self.run_dir, self.inputs["cv_gate_pct"])
        except CclbenchError as error:
            print(f"cclbench: report not written: {error} (retry: cclbench report {self.run_dir})", file=sys.stderr)
            return None
        count = len(anomalies)
        print(f"cclbench: report: {path} ({count} anomal{'y' if count == 1 else 'ies'})", file=sys.stderr, flush=True)
        return verdict

    def finish(self, status, stopped_by=None):
        """The manifest's status, and the invocation's (with the signal that stopped it, if one did)."""
        self.manifest["status"] = status
        if self.manifest["invocations"]:
            self.manifest["invocations"][-1]["finished_utc"] = utc_now()
            self.manifest["invocations"][-1]["status"] = status
            if stopped_by:
                self.manifest["invocations"][-1]["signal"] = stopped_by
        self.save_manifest()
        self.log_line(f"# {utc_now()} run {status}" + (f" by {stopped_by}" if stopped_by else ""))
        if self.log:
            self.log.close()
            self.log = None


# coll_perf's busbw_reason at one rank (bench/core: busbw_null_reason), for records that predate it.
ONE_RANK_BUSBW_REASON = "1 rank: no link is crossed"
# Time columns are named as in coll_perf's --csv (time_us_<stat>), so one name means one thing in both files.
SUMMARY_COLUMNS = ["point", "case_id", "collective", "backend", "nranks", "dtype", "op", "in_place", "bytes",
                   "requested_bytes", "count", "iterations", "time_us_mean", "time_us_p50", "time_us_p95",
                   "time_us_p99", "time_us_cv_pct", "batch_time_us", "gated_time_us", "bandwidth_from", "algbw_gbps",
                   "busbw_gbps", "wrong", "status", "reason", "emulated", "busbw_reason"]


def write_summary_csv(path, records):
    """One row per (point, case_id), latest attempt; missing values are empty cells, never 0."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(SUMMARY_COLUMNS)
    for (_point, _case), record in sorted(latest_by_case(records).items()):
        time_us = record.get("time_us") if isinstance(record.get("time_us"), dict) else {}
        row = {key: record.get(key) for key in SUMMARY_COLUMNS}
        row.update({f"time_us_{stat}": time_us.get(stat) for stat in ("mean", "p50", "p95", "p99", "cv_pct")})
        if record.get("nranks") == 1 and record.get("status") == "ok":
            # One rank crosses no link: busbw is empty with coll_perf's reason, also for records before schema 1.4
            # (their busbw_gbps was 0.0 there), as in coll_perf's own --csv.
            row.update(busbw_gbps=None, busbw_reason=record.get("busbw_reason") or ONE_RANK_BUSBW_REASON)
        writer.writerow(["" if row[key] is None else (str(row[key]).lower() if isinstance(row[key], bool) else row[key])
                         for key in SUMMARY_COLUMNS])
    write_atomic(path, buffer.getvalue())
