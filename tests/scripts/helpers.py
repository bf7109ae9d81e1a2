"""Shared helpers for the scripts tests: run the CLI as a user would, in throwaway directories."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("CCLBENCH_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BINARY_DIR = os.environ.get("CCLBENCH_BINARY_DIR") or os.path.join(SOURCE_DIR, "build")
CCLBENCH = os.path.join(SOURCE_DIR, "scripts", "cclbench")
FAKE_BIN = os.path.join(HERE, "fake_bin")
FAKE_MPIRUN = os.path.join(FAKE_BIN, "mpirun")
VALIDATOR = os.path.join(SOURCE_DIR, "tests", "tools", "validate_json.py")
REAL_APPS = os.path.join(BINARY_DIR, "bench", "apps")
EXTRA_MPIRUN = os.environ.get("CCLBENCH_TEST_MPIRUN_ARGS", "")
SCHEMA_DIR = os.path.join(SOURCE_DIR, "results_schema")

sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))


def run_cli(args, env=None, timeout=600, **kwargs):
    # timeout: a hang detector, generous on purpose (CI machines are shared and loaded; a run of the
    # doubles that takes seconds idle has taken minutes there). No test asserts how fast the CLI is.
    full_env = dict(os.environ)
    full_env.pop("SLURM_JOB_NODELIST", None)
    full_env.pop("SLURM_NODELIST", None)
    full_env.setdefault("CCLBENCH_FAKE_GPU_COUNT", "0")
    full_env.update(env or {})
    return subprocess.run([sys.executable, CCLBENCH] + list(args), capture_output=True, text=True, env=full_env,
                          timeout=timeout, **kwargs)


def validate(schema_name, *paths):
    """(ok, stderr) of tests/tools/validate_json.py with the system interpreter: python3-jsonschema where it
    is installed, else the stdlib subset validator (tests/tools/schema_subset.py)."""
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    result = subprocess.run([python, VALIDATOR, os.path.join(SCHEMA_DIR, schema_name)] + list(paths),
                            capture_output=True, text=True, timeout=120)
    return result.returncode == 0, result.stderr


def read_text(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def main_for_ctest():
    """Runs the module's tests; exits 77 (CTest's skip code) when every test skipped, else 0/1."""
    outcome = unittest.main(exit=False, verbosity=2).result
    if outcome.testsRun and len(outcome.skipped) == outcome.testsRun:
        sys.exit(77)
    sys.exit(0 if outcome.wasSuccessful() else 1)


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cclbench-test-")
        self.results = os.path.join(self.tmp, "results")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assertOneLineError(self, result, code=None, contains=None):
        """The bad-input contract: non-zero exit, one stderr line 'cclbench: error: ...', no traceback."""
        self.assertNotEqual(result.returncode, 0, result.stderr)
        if code is not None:
            self.assertEqual(result.returncode, code, result.stderr)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, f"expected one stderr line, got: {result.stderr!r}")
        self.assertTrue(lines[0].startswith("cclbench: error: "), lines[0])
        self.assertNotIn("Traceback", result.stderr)
        if contains:
            self.assertIn(contains, lines[0])

    def assertRunError(self, result, code=None, contains=None):
        """A run that fails: progress lines, then the error as the last stderr line; no traceback."""
        self.assertNotEqual(result.returncode, 0, result.stderr)
        if code is not None:
            self.assertEqual(result.returncode, code, result.stderr)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        self.assertTrue(lines and lines[-1].startswith("cclbench: error: "), result.stderr)
        self.assertEqual(sum(1 for line in lines if line.startswith("cclbench: error: ")), 1, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        if contains:
            self.assertIn(contains, lines[-1])

    def real_args(self, run_id):
        """The CLI's arguments for runs with the real tools (build/bench/apps) and the real mpirun."""
        args = ["--bin-dir", REAL_APPS, "--results", self.results, "--run-id", run_id]
        if EXTRA_MPIRUN:
            args.append(f"--mpirun-args={EXTRA_MPIRUN}")
        return args

    def fake_args(self, run_id):
        return ["--bin-dir", FAKE_BIN, "--mpirun", FAKE_MPIRUN, "--results", self.results, "--run-id", run_id]


def verdict_fail_codes(run_dir):
    """The sorted fail codes of a run's verdict.json (rules/verdict.py): what made it FAILED."""
    with open(os.path.join(run_dir, "verdict.json"), encoding="utf-8") as handle:
        verdict = json.load(handle)
    return sorted({reason["code"] for reason in verdict["reasons"] if reason["severity"] == "fail"})


def end_process_group(process):
    """SIGKILL to a test's own process group (started with start_new_session) if its leader still runs, then reap
    it: what a test's finally does so a failed assertion leaves no baseline or rank behind."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
