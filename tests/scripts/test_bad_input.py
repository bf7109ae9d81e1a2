"""Bad input: one plain stderr line, non-zero exit, no traceback, nothing measured is touched."""
import hashlib
import json
import os
import unittest

from helpers import FAKE_BIN, FAKE_MPIRUN, TempDirTest, run_cli


def tree_digest(root):
    digest = hashlib.sha256()
    for folder, _dirs, files in sorted(os.walk(root)):
        for name in sorted(files):
            path = os.path.join(folder, name)
            digest.update(path.encode())
            with open(path, "rb") as handle:
                digest.update(handle.read())
    return digest.hexdigest()


class BadInput(TempDirTest):
    def test_usage_errors(self):
        hostfile = os.path.join(self.tmp, "bad_hosts")
        with open(hostfile, "w") as handle:
            handle.write("node5 slots=eight\n")
        cases = [
            (["plan", "--run-id", "../etc"], 2, "run id"),
            (["plan", "--run-id", "a/b"], 2, "run id"),
            (["plan", "--run-id", "x..y"], 2, "run id"),
            (["baseline", "--run-id", ".hidden"], 2, "run id"),
            (["plan", "--hostfile", hostfile], 2, "line 1"),
            (["plan", "--hostfile", os.path.join(self.tmp, "missing")], 2, "does not exist"),
            (["plan", "--hosts", "node5,,node7", "--gpus-per-node", "8", "--hcas", "mlx5_0:1"], 2, "--hosts"),
            (["plan", "--hosts", "node5;rm -rf /", "--gpus-per-node", "8", "--hcas", "mlx5_0:1"], 2, "host name"),
            (["plan", "--hosts", "node5,node7", "--gpus-per-node", "8", "--hcas", "mlx5_0"], 2, "HCA"),
            (["plan", "--gpus-per-node", "8"], 2, "this node has 0 GPU"),
            (["plan", "-b", "64M", "-e", "8K"], 2, "larger"),
            (["plan", "-b", "lots"], 2, "-b"),
            (["plan", "--coll", "all_party"], 2, "unknown collective"),
            (["plan", "--cross-nic", "3"], 2, "--cross-nic"),
            (["plan", "--frobnicate"], 2, None),
            (["nonsense"], 2, None),
            ([], 2, None),
            (["baseline", "--mpirun", "/nonexistent/mpirun", "--bin-dir", FAKE_BIN, "--results", self.results], 2, "mpirun"),
            (["baseline", "--mpirun", "no-such-mpirun-here", "--bin-dir", FAKE_BIN, "--results", self.results], 2, "not on PATH"),
            (["baseline", "--mpirun", FAKE_MPIRUN, "--bin-dir", os.path.join(self.tmp, "nobin"), "--results", self.results], 2, "not built"),
            (["baseline", "--mpirun", FAKE_MPIRUN, "--bin-dir", FAKE_BIN, "--results", self.results,
              "--hosts", "no-such-host.invalid,other.invalid", "--gpus-per-node", "8", "--hcas", "mlx5_0:1"], 2, "unknown host"),
            (["doctor", "--hosts", "localhost,no-such-host.invalid"], 2, "unknown host 'no-such-host.invalid'"),
            (["baseline", "--resume", "nothere", "--results", self.results], 2, "does not exist"),
            (["report", os.path.join(self.tmp, "nothere")], 2, "not a run directory"),
            (["compare", os.path.join(self.tmp, "a"), os.path.join(self.tmp, "b")], 1, "does not exist"),
            (["compare", self.tmp, self.tmp, "--fail-above", "lots"], 2, "--fail-above"),
        ]
        for args, code, text in cases:
            with self.subTest(args=args):
                result = run_cli(args)
                self.assertOneLineError(result, code, text)
        self.assertFalse(os.path.exists(self.results), "bad input creates no run directory")

    def test_existing_run_dir_is_not_touched(self):
        result = run_cli(["baseline", "-b", "8K", "-e", "8K"] + self.fake_args("R"))
        self.assertEqual(result.returncode, 0, result.stderr)
        run_dir = os.path.join(self.results, "R")
        before = tree_digest(run_dir)
        again = run_cli(["baseline", "-b", "8K", "-e", "8K"] + self.fake_args("R"))
        self.assertOneLineError(again, 2, "--resume R")
        self.assertEqual(tree_digest(run_dir), before)

    def test_corrupt_files_for_report_and_compare(self):
        run_dir = os.path.join(self.tmp, "run")
        os.makedirs(run_dir)
        self.assertOneLineError(run_cli(["report", run_dir]), 1, "does not exist")
        with open(os.path.join(run_dir, "run_manifest.json"), "w") as handle:
            handle.write("{not json")
        self.assertOneLineError(run_cli(["report", run_dir]), 1, "not valid JSON")
        with open(os.path.join(run_dir, "run_manifest.json"), "w") as handle:
            json.dump({"schema_version": "1.0.0", "plan": [], "points": {}}, handle)
        with open(os.path.join(run_dir, "cases.jsonl"), "w") as handle:
            handle.write('{"point": "p", "case_id": "c"}\nGARBAGE\n{"point": "p", "case_id": "d"}\n')
        self.assertOneLineError(run_cli(["report", run_dir]), 1, "line 2")
        self.assertFalse(os.path.exists(os.path.join(run_dir, "report.md")))
        self.assertOneLineError(run_cli(["compare", run_dir, run_dir]), 1, "line 2")
        with open(os.path.join(run_dir, "cases.jsonl"), "w") as handle:
            handle.write("")
        self.assertOneLineError(run_cli(["compare", run_dir, run_dir]), 1, "no case records")

    def test_report_refuses_symlinked_output(self):
        result = run_cli(["baseline", "-b", "8K", "-e", "8K"] + self.fake_args("S"))
        self.assertEqual(result.returncode, 0, result.stderr)
        target = os.path.join(self.tmp, "victim")
        with open(target, "w") as handle:
            handle.write("keep me")
        os.remove(os.path.join(self.results, "S", "report.md"))  # the baseline wrote one
        os.symlink(target, os.path.join(self.results, "S", "report.md"))
        self.assertOneLineError(run_cli(["report", os.path.join(self.results, "S")]), 1, "symbolic link")
        with open(target) as handle:
            self.assertEqual(handle.read(), "keep me")


if __name__ == "__main__":
    unittest.main()
