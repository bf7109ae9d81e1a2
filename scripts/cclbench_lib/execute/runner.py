"""`baseline`: runs a plan into results/<RUN_ID>/, resumable point by point."""

import csv
import io
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

from ..base.errors import CclbenchError
from ..base.files import make_dirs, open_append, read_json, terminate_last_line, write_atomic
from ..base.values import COLL_KINDS, utc_now, variant_text
from ..execute.doctor import merge_run_directory
from ..execute.manifest import manifest_path, new_manifest, pending_point, save_manifest
from ..model import launcher
from ..model.records import CASES_FILE, SANITY_FILE, cases_path, latest_by_case, load_cases
from ..model.run_dir import launch_outputs
from ..plan.baseline import Planner, mode_notes
from ..render.report import build_report
from ..rules.ab import choose_binding, sweep_bindings
from ..rules.repeat_rule import repeat_failures


EXIT_MEANINGS = {0: "ok", 1: "some case failed or data was wrong", 2: "bad usage", 3: "transport expectation failed",
                 4: "timeout", 5: "runtime error", 6: "peer lost", 7: "nothing measured", 130: "interrupted",
                 143: "terminated"}


class Interrupted(Exception):
    def __init__(self, signum):
        super().__init__(f"signal {signum}")
        self.signum = signum


class Progress:
    """One stderr line per finished launch, with elapsed time and an ETA from measured points."""

    def __init__(self, launches, stream=sys.stderr):
        self.total = len(launches)
        self.remaining_coll = sum(1 for launch in launches if launch["kind"] in COLL_KINDS)
        self.coll_durations = []
        self.start = time.monotonic()
        self.done = 0
        self.stream = stream

    @staticmethod
    def clock(seconds):
        seconds = int(round(seconds))
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s" if seconds >= 3600 else \
            f"{seconds // 60}m{seconds % 60:02d}s"

    def report(self, launch, status, seconds, detail=""):
        self.done += 1
        if launch["kind"] in COLL_KINDS:
            self.remaining_coll -= 1
            if status == "complete" and seconds is not None:
                self.coll_durations.append(seconds)
        elapsed = time.monotonic() - self.start
        eta = "-"
        if self.coll_durations:
            eta = self.clock(sum(self.coll_durations) / len(self.coll_durations) * self.remaining_coll)
        took = "skipped (already complete)" if seconds is None else f"{status} in {seconds:.1f}s"
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
        for sub in ("doctor", "topology", "p2p", "nccl", "raw", "tuning"):
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
        """Runs one launch, its output into run.log. Returns the exit code (None when killed by us)."""
        self.log_line(f"# {utc_now()} launch {launch['name']}")
        argv = self.runnable_argv(launch)
        self.log_line("$ " + shlex.join(argv))
        env = dict(os.environ)
        env.update(launch.get("env") or {})
        timeout = self.inputs.get("launch_timeout_s")
        timed_out = threading.Event()
        try:
            self.child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=env)
        except OSError as error:
            self.log_line(f"# cannot start: {error.strerror}")
            return None, f"cannot start {launch['argv'][0]}: {error.strerror}"
        timer = None
        if timeout:
            def expire():
                timed_out.set()
                self.stop_child()
            timer = threading.Timer(timeout, expire)
            timer.daemon = True
            timer.start()
        self.first_lines = []  # the launcher's own words when a launch fails (doctor: host unreachable)
        try:
            for raw in self.child.stdout:
                line = raw.decode("utf-8", "replace")
                self.log_line(line)
                if len(self.first_lines) < 60:
                    self.first_lines.append(line)
                if self.verbose:
                    sys.stderr.write(line)
            code = self.child.wait()
        finally:
            if timer:
                timer.cancel()
            self.child = None
        self.log_line(f"# {utc_now()} exit {code}")
        if timed_out.is_set():
            return 4, f"launch exceeded --launch-timeout {timeout}s"
        if self.interrupted_by:
            raise Interrupted(self.interrupted_by)
        return code, None

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
        """SIGTERM now (mpirun forwards it to the ranks), SIGKILL 10 s later if still alive. Never
        waits here: this also runs inside a signal handler while the main thread waits."""
        child = self.child
        if child and child.poll() is None:
            child.terminate()

            def escalate():
                if child.poll() is None:
                    child.kill()
            killer = threading.Timer(10, escalate)
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
        state.update(status="running", attempts=state.get("attempts", 0) + 1, started_utc=utc_now(),
                     finished_utc=None, exit_code=None, reason=None, elapsed_s=None)
        self.save_manifest()
        started = time.monotonic()
        try:
            code, start_problem = self.execute(launch)
        except Interrupted:
            state.update(status="interrupted", finished_utc=utc_now(), elapsed_s=round(time.monotonic() - started, 3),
                         reason="interrupted by signal")
            self.save_manifest()
            raise
        elapsed = time.monotonic() - started
        ok, reason = (False, start_problem) if start_problem else self.check_outputs(launch)
        if code == 1 and launch["kind"] == "doctor" and ok:
            code = 0  # the doctor found a failing check: a finding for doctor.json and the report, not a broken launch
        if code != 0 and not start_problem:
            meaning = EXIT_MEANINGS.get(code, "unexpected exit status")
            reason = f"exit {code} ({meaning})" + (f"; {reason}" if reason else "")
            words = launcher.launch_error_lines("".join(getattr(self, "first_lines", [])))
            if launch["kind"] == "doctor" and words:
                reason += "; the launcher said: " + " / ".join(line[:200] for line in words)
            ok = False
        status = "complete" if ok else "failed"
        state.update(status=status, exit_code=code, reason=reason, finished_utc=utc_now(),
                     elapsed_s=round(elapsed, 3))
        self.save_manifest()
        progress.report(launch, status, elapsed, reason or "")
        return ok

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

    def merge_doctor(self):
        """doctor/<host>.json -> doctor.json after each doctor launch; one stderr line with the verdict."""
        hosts = [launch["hosts"][0] for launch in self.launches if launch["kind"] == "doctor"]
        failures = {}
        for launch in self.launches:
            state = self.manifest["points"].get(launch["name"]) or {}
            if launch["kind"] == "doctor" and state.get("status") == "failed" and state.get("reason"):
                failures[launch["hosts"][0]] = f"no doctor result from {launch['hosts'][0]}: {state['reason']}"
        document = merge_run_directory(self.run_dir, hosts, failures)
        done = all(os.path.exists(os.path.join(self.run_dir, "doctor", f"{host}.json")) for host in hosts)
        if document and done:
            counts = document["summary"]
            print(f"cclbench: doctor: {document['status']} ({counts['fail']} fail, {counts['warn']} warn, "
                  f"{counts['skip']} skip): {os.path.join(self.run_dir, 'doctor.json')}", file=sys.stderr, flush=True)

    def write_summary(self):
        path = cases_path(self.run_dir)
        records = load_cases(path, "case records")[0] if os.path.exists(path) else []
        write_summary_csv(os.path.join(self.run_dir, "summary.csv"), records)
        return records

    def run(self):
        self.prepare()
        progress = Progress(self.launches)
        failures = []
        old_int = signal.signal(signal.SIGINT, self.on_signal)
        old_term = signal.signal(signal.SIGTERM, self.on_signal)
        try:
            for launch in self.launches:
                ok = self.run_launch(launch, progress)
                if launch["kind"] == "topology" and ok:
                    self.check_gpu_count(launch)
                if launch["kind"] == "doctor":
                    self.merge_doctor()
                if not ok:
                    reason = self.manifest["points"][launch["name"]]["reason"]
                    if launch["kind"] == "sanity":
                        self.finish("failed")
                        self.write_report()
                        raise CclbenchError(f"sanity pass failed, nothing else was run: {reason} "
                                            f"(see {os.path.join(self.run_dir, 'run.log')})")
                    if launch.get("ab"):
                        # A forced NCCL_* variant NCCL refuses is an A/B finding (the report names it with
                        # NCCL's words), not a broken baseline.
                        self.log_line(f"# {launch['name']}: --ab variant not measured: {reason}")
                        continue
                    failures.append(f"{launch['name']}: {reason}")
        except Interrupted as interrupt:
            self.finish("interrupted")
            raise CclbenchError(f"interrupted; resume with: cclbench baseline --resume "
                                f"{os.path.basename(self.run_dir)}", 130 if interrupt.signum == signal.SIGINT else 143) from None
        except CclbenchError:
            if self.manifest and self.manifest["status"] == "running":
                self.finish("failed")
            raise
        finally:
            signal.signal(signal.SIGINT, old_int)
            signal.signal(signal.SIGTERM, old_term)
        records = self.write_summary()
        cv_failures = []
        if self.inputs["repeat"] > 1:
            gate = self.inputs["cv_gate_pct"]
            for base, case_id, verdict in repeat_failures(records, gate):
                cv_failures.append({"point": base, "case_id": case_id, "cv_pct": round(verdict["cv_pct"], 3),
                                    "robust_pct": round(verdict["robust_pct"], 3)})
            self.manifest["gates"]["repeat_cv_failures"] = cv_failures
        status = "complete" if not failures and not cv_failures else "failed"
        self.finish(status)
        self.write_report()
        if failures:
            more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
            raise CclbenchError(f"{len(failures)} launch(es) failed: {failures[0]}{more}; "
                                f"see {os.path.join(self.run_dir, 'run.log')}")
        if cv_failures:
            worst = max(cv_failures, key=lambda item: item["cv_pct"])
            raise CclbenchError(f"{len(cv_failures)} case(s) vary across repeats above the CV gate of "
                                f"{self.inputs['cv_gate_pct']}% with no stable median (robust dispersion above the "
                                f"gate too), worst {worst['point']} {worst['case_id']} at CV {worst['cv_pct']:.2f}%, "
                                f"robust {worst['robust_pct']:.2f}%")
        print(f"cclbench: run complete: {self.run_dir}", file=sys.stderr)
        return 0

    def write_report(self):
        """report.md (and plots) at the end of every run that was not interrupted, failed ones included:
        their anomalies are what the reader needs first. A report problem never hides the run's outcome."""
        try:
            path, anomalies = build_report(self.run_dir, self.inputs["cv_gate_pct"])
        except CclbenchError as error:
            print(f"cclbench: report not written: {error} (retry: cclbench report {self.run_dir})", file=sys.stderr)
            return
        count = len(anomalies)
        print(f"cclbench: report: {path} ({count} anomal{'y' if count == 1 else 'ies'})", file=sys.stderr, flush=True)

    def finish(self, status):
        self.manifest["status"] = status
        if self.manifest["invocations"]:
            self.manifest["invocations"][-1]["finished_utc"] = utc_now()
            self.manifest["invocations"][-1]["status"] = status
        self.save_manifest()
        self.log_line(f"# {utc_now()} run {status}")
        if self.log:
            self.log.close()
            self.log = None


# Time columns are named as in coll_perf's --csv (time_us_<stat>), so one name means one thing in both files.
SUMMARY_COLUMNS = ["point", "case_id", "collective", "backend", "nranks", "dtype", "op", "in_place", "bytes",
                   "requested_bytes", "count", "iterations", "time_us_mean", "time_us_p50", "time_us_p95",
                   "time_us_p99", "time_us_cv_pct", "batch_time_us", "gated_time_us", "bandwidth_from", "algbw_gbps",
                   "busbw_gbps", "wrong", "status", "reason", "emulated"]


def write_summary_csv(path, records):
    """One row per (point, case_id), latest attempt; missing values are empty cells, never 0."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(SUMMARY_COLUMNS)
    for (_point, _case), record in sorted(latest_by_case(records).items()):
        time_us = record.get("time_us") if isinstance(record.get("time_us"), dict) else {}
        row = {key: record.get(key) for key in SUMMARY_COLUMNS}
        row.update({f"time_us_{stat}": time_us.get(stat) for stat in ("mean", "p50", "p95", "p99", "cv_pct")})
        writer.writerow(["" if row[key] is None else (str(row[key]).lower() if isinstance(row[key], bool) else row[key])
                         for key in SUMMARY_COLUMNS])
    write_atomic(path, buffer.getvalue())
