"""A TMPDIR of its own for each mpirun started beside others (execute/launch_tmpdir.py): Open MPI's session folder
per host and user, removed by the last job there, made CI's doctor path probes fail at once ("A call to mkdir was
unable to create the desired directory") when one probe's clean-up removed it under another's start.

The folder's life is checked from the launched process's own view (a stand-in launcher that records its TMPDIR and
whether it exists, while the other probes run); that Open MPI puts its session folder there is checked against the
real mpirun, which reports it to its rank (OMPI_MCA_orte_top_session_dir).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.environ.get("CCLBENCH_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "scripts"))
from cclbench_lib.execute.launch_tmpdir import PREFIX, own_tmpdir  # noqa: E402
from cclbench_lib.execute.path_mtu import JSON_LINE_PREFIX, probe_hosts  # noqa: E402

# A launcher that records what it was started with: its TMPDIR, whether that folder exists, and its argv; it stays
# a moment so that the probes of the hosts overlap, and answers as a probe rank does (no results).
STAND_IN = """#!/usr/bin/env python3
import json, os, sys, time
record = {"argv": sys.argv[1:], "tmpdir": os.environ.get("TMPDIR"),
          "exists": os.path.isdir(os.environ.get("TMPDIR") or "/nonexistent")}
with open(os.path.join(%(records)r, "%%d.json" %% os.getpid()), "w") as handle:
    json.dump(record, handle)
time.sleep(0.5)
print(%(prefix)r + "[]")
"""


def iface(name, address):
    return {"name": name, "address": address, "prefixlen": 24, "mtu": 9000, "rail": True}


HOSTS = ("node1", "node2", "node3")
DOCUMENTS = {host: {"rails": {host: {"source": "NCCL_SOCKET_IFNAME", "reason": None,
                                     "interfaces": [iface("eth0", f"198.18.10.{n}")]}}}
             for n, host in enumerate(HOSTS, start=1)}


class OwnTmpdir(unittest.TestCase):
    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="cclbench-test-tmpdir-")
        self.addCleanup(shutil.rmtree, self.base, True)

    def test_each_mpirun_gets_a_new_folder_in_the_callers_tmpdir_removed_with_what_it_holds(self):
        env = {"TMPDIR": self.base, "PATH": "/usr/bin"}
        with own_tmpdir(env, "mpirun") as first, own_tmpdir(env, "mpirun") as second:
            folders = [first["TMPDIR"], second["TMPDIR"]]
            self.assertNotEqual(folders[0], folders[1])
            for folder in folders:
                self.assertEqual(os.path.dirname(folder), self.base)
                self.assertTrue(os.path.basename(folder).startswith(PREFIX))
                self.assertTrue(os.path.isdir(folder))
            os.makedirs(os.path.join(folders[0], "ompi.node1.0", "pid.42"))  # what mpirun leaves after a kill
            self.assertEqual(first["PATH"], "/usr/bin")
        self.assertEqual(env, {"TMPDIR": self.base, "PATH": "/usr/bin"})  # the caller's own is untouched
        self.assertEqual(os.listdir(self.base), [])

    def test_srun_keeps_the_callers_tmpdir(self):
        # srun hands its environment to tasks on other hosts, where a folder made here does not exist.
        with own_tmpdir({"TMPDIR": self.base}, "srun") as env:
            self.assertEqual(env["TMPDIR"], self.base)
        self.assertEqual(os.listdir(self.base), [])

    def test_a_folder_that_cannot_be_made_leaves_the_environment_and_the_launch_runs(self):
        missing = os.path.join(self.base, "gone")
        with own_tmpdir({"TMPDIR": missing}, "mpirun") as env:
            self.assertEqual(env["TMPDIR"], missing)


class ProbesSideBySide(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="cclbench-test-probes-")
        self.addCleanup(shutil.rmtree, self.work, True)
        self.records = os.path.join(self.work, "records")
        self.base = os.path.join(self.work, "tmp")
        os.makedirs(self.records)
        os.makedirs(self.base)
        self.launcher = os.path.join(self.work, "launcher")
        with open(self.launcher, "w") as handle:
            handle.write(STAND_IN % {"records": self.records, "prefix": JSON_LINE_PREFIX})
        os.chmod(self.launcher, 0o755)
        old = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = self.base
        self.addCleanup(lambda: os.environ.pop("TMPDIR") if old is None else os.environ.update(TMPDIR=old))

    def probe(self, launcher):
        inputs = {"mpirun": self.launcher, "mpirun_args": [], "as_root": False, "exported_env": {},
                  "exported_env_names": [], "launcher": launcher}
        probe_hosts(inputs, DOCUMENTS, "/bin/true", timeout=60)
        records = []
        for name in os.listdir(self.records):
            with open(os.path.join(self.records, name)) as handle:
                records.append(json.load(handle))
        return records

    def test_the_hosts_probes_run_at_once_each_mpirun_in_a_folder_of_its_own(self):
        records = self.probe({"name": "mpirun", "program": self.launcher, "mpi": None, "reason": "test"})
        self.assertEqual(len(records), len(HOSTS))
        self.assertEqual({r["argv"][r["argv"].index("--host") + 1] for r in records}, set(HOSTS))
        folders = {r["tmpdir"] for r in records}
        self.assertEqual(len(folders), len(HOSTS), records)  # no two launches share one
        for record in records:
            self.assertTrue(record["exists"], record)
            self.assertEqual(os.path.dirname(record["tmpdir"]), self.base)
        self.assertEqual(os.listdir(self.base), [])  # each removed when its launch ended

    def test_srun_probes_keep_the_callers_tmpdir(self):
        records = self.probe({"name": "srun", "program": self.launcher, "mpi": "pmix", "reason": "test",
                              "args": []})
        self.assertEqual(len(records), len(HOSTS))
        self.assertEqual({r["tmpdir"] for r in records}, {self.base})


class RealMpirun(unittest.TestCase):
    def test_open_mpi_puts_its_session_folder_in_the_launchs_own_tmpdir(self):
        mpirun = shutil.which("mpirun")
        if not mpirun:
            self.skipTest("no mpirun on PATH")
        base = tempfile.mkdtemp(prefix="cclbench-test-tmpdir-")
        self.addCleanup(shutil.rmtree, base, True)
        env = dict(os.environ, TMPDIR=base, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        with own_tmpdir(env, "mpirun") as launch_env:
            out = subprocess.run([mpirun, "--oversubscribe", "-np", "1", "sh", "-c",
                                  "echo $OMPI_MCA_orte_top_session_dir $PRTE_MCA_prte_top_session_dir"],
                                 env=launch_env, capture_output=True, text=True, timeout=120, check=False)
            own = launch_env["TMPDIR"]
        self.assertEqual(out.returncode, 0, out.stderr)
        words = out.stdout.split()
        if not words:
            self.skipTest(f"this MPI reports no session folder to its ranks: {out.stdout!r}")
        self.assertEqual(os.path.dirname(words[0]), own, out.stdout)
        self.assertEqual(os.listdir(base), [])


if __name__ == "__main__":
    unittest.main()
