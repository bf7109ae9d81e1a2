"""Helpers: sizes, run ids, the environment allowlist, crash-safe writes, torn JSONL tails."""
import os
import unittest
from unittest import mock

from helpers import TempDirTest

from cclbench_lib.base.environment import allowlisted_env
from cclbench_lib.base.errors import CclbenchError, UsageError
from cclbench_lib.base.files import append_line, read_jsonl, write_atomic
from cclbench_lib.base.values import format_size, parse_percent, parse_size, sweep_sizes, validate_run_id


class Common(TempDirTest):
    def test_sizes(self):
        self.assertEqual(parse_size("8K", "-b"), 8192)
        self.assertEqual(parse_size("64m", "-e"), 64 << 20)
        self.assertEqual(parse_size("4096", "-b"), 4096)
        self.assertEqual(format_size(8192), "8K")
        self.assertEqual(format_size(64 << 20), "64M")
        self.assertEqual(format_size(1000), "1000")
        self.assertEqual(len(sweep_sizes(8 << 10, 64 << 20, 2)), 14, "8K..64M by 2 is 14 sizes")
        for bad in ("", "K", "-8K", "8X", "0"):
            with self.assertRaises(UsageError):
                parse_size(bad, "-b")
        self.assertEqual(parse_percent("5%", "x"), 5.0)
        with self.assertRaises(UsageError):
            parse_percent("five", "x")

    def test_run_ids(self):
        for good in ("20260101T000000Z", "a", "run-1.2_x"):
            self.assertEqual(validate_run_id(good), good)
        for bad in ("", "..", "a/b", "../x", ".x", "-x", "a..b", "x" * 129, "a b", "a\nb"):
            with self.assertRaises(UsageError, msg=bad):
                validate_run_id(bad)

    def test_environment_allowlist(self):
        env, redacted = allowlisted_env({"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_NET_TOKEN": "s3cret", "CUDA_VISIBLE_DEVICES": "0",
                                         "OMPI_COMM_WORLD_SIZE": "16", "OMPI_MCA_foo": "x", "SLURM_NNODES": "2",
                                         "SLURM_JOB_PASSWORD": "p", "UCX_TLS": "rc", "AWS_SECRET_ACCESS_KEY": "k",
                                         "HOME": "/root", "PATH": "/bin"})
        self.assertEqual(env, {"NCCL_IB_HCA": "=mlx5_0:1", "CUDA_VISIBLE_DEVICES": "0", "OMPI_COMM_WORLD_SIZE": "16",
                               "SLURM_NNODES": "2", "UCX_TLS": "rc"})
        self.assertEqual(redacted, ["NCCL_NET_TOKEN"])

    def test_atomic_write_refuses_symlinks(self):
        path = os.path.join(self.tmp, "sub", "file.json")
        write_atomic(path, "one")
        write_atomic(path, "two")
        with open(path) as handle:
            self.assertEqual(handle.read(), "two")
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o644)
        self.assertEqual(os.listdir(os.path.dirname(path)), ["file.json"], "no temporary file left")
        target = os.path.join(self.tmp, "target")
        with open(target, "w") as handle:
            handle.write("keep")
        link = os.path.join(self.tmp, "link")
        os.symlink(target, link)
        with self.assertRaises(CclbenchError):
            write_atomic(link, "overwrite")
        with self.assertRaises(CclbenchError):
            append_line(link, "{}")
        with open(target) as handle:
            self.assertEqual(handle.read(), "keep")

    def test_a_signal_mid_write_leaves_the_old_file_whole_and_no_temporary_file(self):
        """An exception a signal handler raises inside the write (here in its fsync, before the rename; Ctrl-C's
        KeyboardInterrupt or the runner's own): it propagates, the file is the old one and nothing else is left."""
        path = os.path.join(self.tmp, "sub", "verdict.json")
        write_atomic(path, "old")
        with mock.patch("os.fsync", side_effect=KeyboardInterrupt):
            with self.assertRaises(KeyboardInterrupt):
                write_atomic(path, "new")
        with open(path) as handle:
            self.assertEqual(handle.read(), "old")
        self.assertEqual(os.listdir(os.path.dirname(path)), ["verdict.json"], "no temporary file left")

    def test_torn_jsonl_tail_is_tolerated_but_middle_garbage_is_not(self):
        path = os.path.join(self.tmp, "cases.jsonl")
        with open(path, "w") as handle:
            handle.write('{"a": 1}\n{"a": 2}\n{"a": 3, "b"')
        records, bad = read_jsonl(path, "case records")
        self.assertEqual([r["a"] for r in records], [1, 2])
        self.assertEqual(bad, [3])
        with open(path, "w") as handle:
            handle.write('{"a": 1}\n[1, 2]\n{"a": 3}\n')
        with self.assertRaises(CclbenchError):
            read_jsonl(path, "case records")


class PointCompleteness(unittest.TestCase):
    @staticmethod
    def record(collective, size, placement, status="ok", wrong=0):
        return {"point": "p", "case_id": f"{collective}.float.none.{placement}.{size}", "collective": collective,
                "requested_bytes": size, "status": status, "wrong": wrong,
                "time_us": {"mean": 5.0, "p50": 5.0} if status == "ok" else None,
                "reason": None if status == "ok" else "why"}

    def test_a_skip_with_its_reason_is_an_answer_but_wrong_data_and_errors_fail(self):
        from cclbench_lib.model.records import point_completeness
        launch = {"name": "p", "collectives": ["alltoall"], "sizes": [8192]}
        skipped_in_place = [self.record("alltoall", 8192, "out"), self.record("alltoall", 8192, "in", status="skipped")]
        self.assertEqual(point_completeness(skipped_in_place, launch), (True, [], []))
        for bad in (self.record("alltoall", 8192, "in", wrong=3), self.record("alltoall", 8192, "in", status="error")):
            complete, missing, failed = point_completeness([self.record("alltoall", 8192, "out"), bad], launch)
            self.assertFalse(complete)
            self.assertEqual(failed, [bad])
        self.assertEqual(point_completeness([], launch), (False, [("alltoall", 8192)], []))


if __name__ == "__main__":
    unittest.main()
