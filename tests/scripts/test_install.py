"""`cmake --install` into a temporary prefix that is then moved away (cclbench must find its programs
and schemas relative to itself), and the CPack .deb: its file list and dependencies. Skipped (77)
when coll_perf is not built."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from helpers import BINARY_DIR, SOURCE_DIR, main_for_ctest, read_jsonl

APPS = os.path.join(BINARY_DIR, "bench", "apps")
# What the package must hold besides the schemas, whatever the build (p2p_matrix only with CUDA).
HOST_PROGRAMS = ["coll_perf", "all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf",
                 "broadcast_perf", "reduce_perf", "sendrecv_perf", "topo_map", "nccl_evidence", "cclbench"]
SCHEMAS = sorted(name for name in os.listdir(os.path.join(SOURCE_DIR, "results_schema")) if name.endswith(".schema.json"))
# The package's modules in its layer subpackages (base/, model/, ...), as paths relative to cclbench_lib/.
LIBRARY = sorted(os.path.relpath(os.path.join(directory, name), os.path.join(SOURCE_DIR, "scripts", "cclbench_lib"))
                 for directory, _subdirs, files in os.walk(os.path.join(SOURCE_DIR, "scripts", "cclbench_lib"))
                 for name in files if name.endswith(".py"))


def clean_env(**extra):
    """The environment of a user who has the installation and nothing of the checkout."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("CCLBENCH_", "PYTHON")) and not name.startswith("SLURM_")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_mpi_yield_when_idle="1",
               PYTHONDONTWRITEBYTECODE="1", CCLBENCH_FAKE_GPU_COUNT="0")
    env.update(extra)
    return env


def programs_expected():
    names = list(HOST_PROGRAMS)
    if os.path.exists(os.path.join(APPS, "p2p_matrix")):
        names.append("p2p_matrix")
    return sorted(names)


class Installed(unittest.TestCase):
    def setUp(self):
        if not os.access(os.path.join(APPS, "coll_perf"), os.X_OK):
            self.skipTest(f"coll_perf is not built in {APPS}")
        self.tmp = tempfile.mkdtemp(prefix="cclbench-install-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_ok(self, argv, **kwargs):
        result = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)
        self.assertEqual(result.returncode, 0, f"{argv}: {result.stderr[-3000:]}")
        return result

    def test_moved_prefix_runs_smoke_and_plans_from_itself(self):
        staged = os.path.join(self.tmp, "staged")
        self.run_ok(["cmake", "--install", BINARY_DIR, "--prefix", staged])
        prefix = os.path.join(self.tmp, "elsewhere", "opt-cclbench")
        os.makedirs(os.path.dirname(prefix))
        os.rename(staged, prefix)  # the prefix it was installed to no longer exists
        work = os.path.join(self.tmp, "work")
        os.makedirs(work)
        cclbench = os.path.join(prefix, "bin", "cclbench")
        env = clean_env(PATH="/usr/bin:/bin")

        version = self.run_ok([cclbench, "--version"], cwd=work, env=env).stdout
        self.assertIn(f"programs: {prefix}/bin;", version)
        self.assertIn(f"schemas: {prefix}/share/cclbench/results_schema)", version)
        self.assertEqual(sorted(os.listdir(os.path.join(prefix, "share", "cclbench", "results_schema"))), SCHEMAS)

        self.run_ok([cclbench, "smoke", "--results", "results", "--run-id", "smoke"], cwd=work, env=env)
        run_dir = os.path.join(work, "results", "smoke")
        with open(os.path.join(run_dir, "run_manifest.json")) as handle:
            manifest = json.load(handle)
        self.assertEqual(manifest["status"], "complete")
        self.assertEqual(manifest["plan_inputs"]["bin_dir"], os.path.join(prefix, "bin"))
        with open(os.path.join(prefix, "share", "cclbench", "python", "cclbench_lib", "install_layout.json")) as handle:
            commit = json.load(handle)["git_commit"]
        self.assertEqual(manifest["tool"]["git_commit"], None if commit == "unknown" else commit)
        self.assertTrue(any(r["nranks"] == 4 and r["status"] == "ok" for r in read_jsonl(os.path.join(run_dir, "cases.jsonl"))))

        plan = self.run_ok([cclbench, "baseline", "--dry-run", "--hosts", "node5,node7", "--gpus-per-node", "8",
                            "--hcas", "mlx5_0:1,mlx5_3:1", "--results", "results"], cwd=work, env=env).stdout
        programs = {word for line in plan.splitlines() for word in line.split() if word.startswith("/")
                    and os.path.basename(word) in ("coll_perf", "topo_map", "p2p_matrix")}
        self.assertEqual({os.path.dirname(word) for word in programs}, {os.path.join(prefix, "bin")}, plan)
        for text in (plan, json.dumps(manifest)):
            self.assertNotIn(SOURCE_DIR, text)
            self.assertNotIn(BINARY_DIR, text)


class DebianPackage(unittest.TestCase):
    def setUp(self):
        if not os.access(os.path.join(APPS, "coll_perf"), os.X_OK):
            self.skipTest(f"coll_perf is not built in {APPS}")
        if not shutil.which("dpkg-deb") or not shutil.which("cpack"):
            self.skipTest("dpkg-deb or cpack is not installed")
        self.tmp = tempfile.mkdtemp(prefix="cclbench-deb-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_deb_file_list_and_dependencies(self):
        result = subprocess.run(["cpack", "--config", os.path.join(BINARY_DIR, "CPackConfig.cmake"), "-B", self.tmp],
                                capture_output=True, text=True, timeout=600, cwd=self.tmp)
        self.assertEqual(result.returncode, 0, result.stdout[-2000:] + result.stderr[-2000:])
        debs = [name for name in os.listdir(self.tmp) if name.endswith(".deb")]
        self.assertEqual(len(debs), 1, os.listdir(self.tmp))
        deb = os.path.join(self.tmp, debs[0])
        listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
        files = sorted(line.split()[-1].lstrip(".") for line in listing.splitlines() if not line.startswith("d"))
        expected = ([f"/usr/bin/{name}" for name in programs_expected()] +
                    [f"/usr/share/cclbench/python/cclbench_lib/{name}" for name in LIBRARY] +
                    ["/usr/share/cclbench/python/cclbench_lib/install_layout.json"] +
                    [f"/usr/share/cclbench/results_schema/{name}" for name in SCHEMAS] +
                    ["/usr/share/doc/cclbench/README.md"])
        self.assertEqual(files, sorted(expected))

        def field(name):
            out = subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True, text=True, check=True).stdout
            return [item.strip() for item in out.strip().split(",") if item.strip()]
        self.assertEqual(field("Package"), ["cclbench"])
        depends = [item.split()[0] for item in field("Depends")]
        owner = subprocess.run(["dpkg-query", "-S", "*/libmpi.so.40"], capture_output=True, text=True).stdout
        mpi_library = owner.split(":")[0] if owner else "libopenmpi3"
        for needed in ("openmpi-bin", mpi_library, "python3"):
            self.assertIn(needed, depends)
        self.assertTrue(any(item.startswith("libhwloc") for item in depends), depends)
        recommends = [item.split()[0] for item in field("Recommends")]
        if "p2p_matrix" in programs_expected():  # a CUDA build: NCCL and cudart come from NVIDIA's repository
            self.assertIn("libnccl2", recommends)
            self.assertTrue(any(item.startswith("cuda-cudart-") for item in recommends), recommends)
            self.assertNotIn("libnccl2", depends)

        # Unpacked anywhere, the package's cclbench still finds its own programs and schemas.
        root = os.path.join(self.tmp, "root")
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
        version = subprocess.run([os.path.join(root, "usr", "bin", "cclbench"), "--version"], capture_output=True,
                                 text=True, env=clean_env(), timeout=120)
        self.assertEqual(version.returncode, 0, version.stderr)
        self.assertIn(f"programs: {root}/usr/bin;", version.stdout)
        self.assertIn(f"schemas: {root}/usr/share/cclbench/results_schema)", version.stdout)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main_for_ctest()
