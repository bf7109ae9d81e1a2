"""tests/CMakeLists.txt's CCLBENCH_TEST_COSTS against the build: every test the table names is a test of this build,
and carries the COST of the build's column (the README's test command's build reads the first, a sanitizer build the
second), read back from CTest itself (`ctest --show-only=json-v1`). A misspelt name or a mixed-up column would only
reorder CI's tests, slowly and unseen; here it is a failure."""
import json
import os
import re
import shutil
import subprocess
import unittest

from helpers import SOURCE_DIR

BINARY_DIR = os.environ.get("CCLBENCH_BINARY_DIR", os.path.join(SOURCE_DIR, "build"))


def cost_table(text):
    """{test: (tests_s, sanitize_s or None)} from the set(CCLBENCH_TEST_COSTS ...) block of tests/CMakeLists.txt."""
    block = re.search(r"set\(CCLBENCH_TEST_COSTS\n(.*?)\)\n", text, re.S).group(1)
    words = [word for line in block.splitlines() for word in line.split("#")[0].split()]
    if len(words) % 3:
        raise ValueError(f"CCLBENCH_TEST_COSTS: {len(words)} words, not rows of three")
    rows = {}
    for name, tests_s, sanitize_s in zip(words[0::3], words[1::3], words[2::3]):
        rows[name] = (float(tests_s), None if sanitize_s == "-" else float(sanitize_s))
    return rows


def cache_value(name):
    with open(os.path.join(BINARY_DIR, "CMakeCache.txt"), encoding="utf-8") as handle:
        for line in handle:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    return ""


class TestCosts(unittest.TestCase):
    def test_the_table_parses_into_rows_of_three(self):
        rows = cost_table("set(CCLBENCH_TEST_COSTS\n  # test tests sanitize\n  a 3 -\n  b 11 42)\n")
        self.assertEqual(rows, {"a": (3.0, None), "b": (11.0, 42.0)})
        with self.assertRaises(ValueError):
            cost_table("set(CCLBENCH_TEST_COSTS\n  a 3\n)\n")

    def test_every_named_test_is_in_the_build_with_its_columns_cost(self):
        ctest = shutil.which("ctest")
        if not ctest or not os.path.exists(os.path.join(BINARY_DIR, "CTestTestfile.cmake")):
            self.skipTest(f"no ctest on PATH or no configured build in {BINARY_DIR}")
        with open(os.path.join(SOURCE_DIR, "tests", "CMakeLists.txt"), encoding="utf-8") as handle:
            table = cost_table(handle.read())
        shown = json.loads(subprocess.run([ctest, "--show-only=json-v1"], cwd=BINARY_DIR, capture_output=True,
                                          text=True, check=True, timeout=120).stdout)
        costs = {}
        for test in shown["tests"]:
            properties = {item["name"]: item["value"] for item in test.get("properties", [])}
            costs[test["name"]] = properties.get("COST")
        sanitizer_build = bool(cache_value("CCLBENCH_SANITIZE"))
        without_mpi = cache_value("CCLBENCH_MPIEXEC").endswith("NOTFOUND")
        for name, (tests_s, sanitize_s) in table.items():
            with self.subTest(test=name):
                if name not in costs:
                    if without_mpi and re.match(r"(coll_perf_|reliability_|scripts_decode_real|scripts_record_size)",
                                                name):
                        continue  # a build without mpirun has no MPI tests
                    self.fail(f"{name}: in CCLBENCH_TEST_COSTS but not a test of {BINARY_DIR}")
                expected = sanitize_s if sanitizer_build else tests_s
                if expected is None:
                    continue  # "-": the test does not run in that build's stage
                self.assertEqual(costs[name], expected, f"{name}: COST {costs[name]}, the table says {expected}")


if __name__ == "__main__":
    unittest.main()
