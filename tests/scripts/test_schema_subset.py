"""tests/tools/schema_subset.py, the stdlib validator that validate_json.py falls back to.

Two layers: keyword cases whose verdicts come from the JSON Schema 2020-12 text (always run), and a
differential check against python3-jsonschema on real documents written by our tools plus thousands of
mutations of them (skipped, visibly, where python3-jsonschema is not installed).
"""
import copy
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import unittest

from helpers import BINARY_DIR, SCHEMA_DIR, SOURCE_DIR, VALIDATOR, TempDirTest, run_cli

sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "tools"))
import schema_subset  # noqa: E402
import validate_json  # noqa: E402

try:
    import jsonschema  # noqa: F401
    HAVE_JSONSCHEMA = True
except ImportError:
    HAVE_JSONSCHEMA = False


def subset_ok(schema, document, store=None):
    return schema_subset.Validator(schema, store).is_valid(document)


class KeywordVerdicts(unittest.TestCase):
    """Expected verdicts from the draft 2020-12 specification, not from either implementation."""

    def test_types(self):
        self.assertTrue(subset_ok({"type": "integer"}, 1.0), "2020-12: a number with zero fraction is an integer")
        self.assertFalse(subset_ok({"type": "integer"}, 1.5))
        self.assertFalse(subset_ok({"type": "integer"}, True), "booleans are not numbers")
        self.assertFalse(subset_ok({"type": "number"}, False))
        self.assertTrue(subset_ok({"type": ["string", "null"]}, None))
        self.assertFalse(subset_ok({"type": ["string", "null"]}, 0))
        self.assertFalse(subset_ok({"type": "object"}, []))

    def test_enum_and_const_use_json_equality(self):
        self.assertFalse(subset_ok({"enum": [1, 2]}, True), "true is not 1 in JSON")
        self.assertTrue(subset_ok({"enum": [1, 2]}, 1.0))
        self.assertFalse(subset_ok({"const": False}, 0))
        self.assertTrue(subset_ok({"const": {"a": [1]}}, {"a": [1.0]}))

    def test_numbers_and_strings(self):
        self.assertTrue(subset_ok({"minimum": 0}, 0))
        self.assertFalse(subset_ok({"exclusiveMinimum": 0}, 0))
        self.assertFalse(subset_ok({"maximum": 1}, 1.0001))
        self.assertTrue(subset_ok({"minimum": 5}, "not a number"), "numeric keywords ignore other types")
        self.assertFalse(subset_ok({"minLength": 1}, ""))
        self.assertTrue(subset_ok({"pattern": "b"}, "abc"), "pattern is not anchored")
        self.assertFalse(subset_ok({"pattern": "^b"}, "abc"))

    def test_objects(self):
        schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "patternProperties": {"^x_": {"type": "string"}},
                  "additionalProperties": False, "required": ["a"]}
        self.assertTrue(subset_ok(schema, {"a": 1, "x_y": "s"}))
        self.assertFalse(subset_ok(schema, {"a": 1, "b": 2}), "b is additional")
        self.assertFalse(subset_ok(schema, {"a": 1, "x_y": 3}))
        self.assertFalse(subset_ok(schema, {"x_y": "s"}), "a is required")
        self.assertFalse(subset_ok({"propertyNames": {"pattern": "^[a-z]+$"}}, {"A": 1}))
        self.assertFalse(subset_ok({"additionalProperties": {"type": "string"}}, {"k": 1}))

    def test_arrays(self):
        self.assertFalse(subset_ok({"items": {"type": "string"}}, ["a", 1]))
        self.assertFalse(subset_ok({"minItems": 1}, []))
        self.assertFalse(subset_ok({"maxItems": 1}, [1, 2]))

    def test_combinators(self):
        one_of = {"oneOf": [{"type": "integer"}, {"minimum": 0}]}
        self.assertFalse(subset_ok(one_of, 3), "both branches hold: not exactly one")
        self.assertTrue(subset_ok(one_of, -3))
        self.assertTrue(subset_ok(one_of, 0.5))
        self.assertFalse(subset_ok({"anyOf": [{"type": "string"}, {"type": "null"}]}, 1))
        self.assertFalse(subset_ok({"allOf": [{"minimum": 0}, {"maximum": 1}]}, 2))
        self.assertFalse(subset_ok({"not": {"type": "null"}}, None))
        conditional = {"if": {"properties": {"s": {"const": "ok"}}}, "then": {"required": ["v"]}, "else": {"required": ["why"]}}
        self.assertFalse(subset_ok(conditional, {"s": "ok"}))
        self.assertTrue(subset_ok(conditional, {"s": "ok", "v": 1}))
        self.assertFalse(subset_ok(conditional, {"s": "bad"}))
        self.assertTrue(subset_ok(conditional, {"s": "bad", "why": "x"}))

    def test_refs_local_and_sibling(self):
        sibling = {"$id": "https://x.invalid/s/b.schema.json", "$defs": {"n": {"type": "integer"}}}
        root = {"$id": "https://x.invalid/s/a.schema.json", "$defs": {"s": {"type": "string"}},
                "properties": {"p": {"$ref": "#/$defs/s"}, "q": {"$ref": "b.schema.json#/$defs/n"}}}
        store = {"b.schema.json": sibling, sibling["$id"]: sibling}
        self.assertTrue(subset_ok(root, {"p": "s", "q": 3}, store))
        self.assertFalse(subset_ok(root, {"p": 1}, store))
        self.assertFalse(subset_ok(root, {"q": "x"}, store))

    def test_unsupported_keyword_is_refused(self):
        with self.assertRaises(schema_subset.SchemaSubsetError):
            schema_subset.Validator({"properties": {"a": {"uniqueItems": True}}})

    def test_every_results_schema_is_inside_the_subset(self):
        names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(SCHEMA_DIR, "*.schema.json")))
        self.assertGreaterEqual(len(names), 8)
        for name in names:
            path = os.path.join(SCHEMA_DIR, name)
            with open(path, encoding="utf-8") as handle:
                schema_subset.Validator(json.load(handle), validate_json.sibling_store(path))


class ValidateJsonCli(TempDirTest):
    def run_validator(self, *args, env=None):
        return subprocess.run([sys.executable, VALIDATOR] + list(args), capture_output=True, text=True, timeout=60,
                              env=env)

    def test_without_jsonschema_auto_validates_with_stdlib(self):
        """The GPU machine's case: no python3-jsonschema. Validation still happens, and says how."""
        hide = os.path.join(self.tmp, "hide")
        os.makedirs(hide)
        with open(os.path.join(hide, "jsonschema.py"), "w", encoding="utf-8") as handle:
            handle.write("raise ImportError('hidden by the test')\n")
        env = dict(os.environ, PYTHONPATH=hide)
        schema = os.path.join(SCHEMA_DIR, "topology.schema.json")
        good = os.path.join(SOURCE_DIR, "tests", "scripts", "data", "topology_rtxpro.json")
        result = self.run_validator(schema, good, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("validating with the stdlib subset validator", result.stderr)
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w", encoding="utf-8") as handle:
            json.dump({"schema_version": "1.0.0"}, handle)
        self.assertEqual(self.run_validator(schema, bad, env=env).returncode, 1)
        self.assertEqual(self.run_validator("--engine", "jsonschema", schema, good, env=env).returncode, 2)

    def test_stdlib_engine_accepts_and_rejects(self):
        good = os.path.join(SOURCE_DIR, "tests", "scripts", "data", "topology_rtxpro.json")
        schema = os.path.join(SCHEMA_DIR, "topology.schema.json")
        self.assertEqual(self.run_validator("--engine", "stdlib", schema, good).returncode, 0)
        with open(good, encoding="utf-8") as handle:
            document = json.load(handle)
        document["schema_version"] = "2.0.0"
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
        result = self.run_validator("--engine=stdlib", schema, bad)
        self.assertEqual(result.returncode, 1)
        self.assertIn("/schema_version", result.stderr)
        self.assertEqual(self.run_validator("--engine", "nope", schema, good).returncode, 2)


def mutations(document, rng, count):
    """Up to count variants of document, each with one change: a member dropped, a value of another type,
    an unknown member, a number pushed below zero, a string emptied."""
    paths = []

    def walk(node, path):
        paths.append(path)
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, path + [key])
        elif isinstance(node, list):
            for index, value in enumerate(node[:3]):
                walk(value, path + [index])

    walk(document, [])
    replacements = [None, "x", "", -1, 0.5, True, [], {}, 7]
    for _ in range(count):
        path = rng.choice(paths)
        variant = copy.deepcopy(document)
        parent = None
        node = variant
        for part in path:
            parent, node = node, node[part]
        kind = rng.randrange(4)
        if kind == 0 and isinstance(node, dict):
            node["zz_unknown_member"] = 1
        elif kind == 1 and path and isinstance(parent, dict):
            del parent[path[-1]]
        elif kind == 2 and isinstance(node, (int, float)) and not isinstance(node, bool) and path:
            parent[path[-1]] = -node - 1
        elif path:
            parent[path[-1]] = rng.choice(replacements)
        else:
            continue
        yield path, variant


@unittest.skipUnless(HAVE_JSONSCHEMA, "python3-jsonschema is not installed: differential check against it skipped "
                                      "(the stdlib validator is still checked by KeywordVerdicts)")
class AgreesWithJsonschema(TempDirTest):
    """Same verdict as python3-jsonschema on documents our tools write, and on mutations of them."""

    def produce(self):
        """(schema name, document) pairs from the built tools; whichever are built."""
        found = []

        def shortened(node):
            """Arrays cut to their first two members: the shapes stay, the validation time drops."""
            if isinstance(node, dict):
                return {key: shortened(value) for key, value in node.items()}
            if isinstance(node, list):
                return [shortened(value) for value in node[:2]]
            return node

        def load(schema, path):
            with open(path, encoding="utf-8") as handle:
                if path.endswith(".jsonl"):
                    lines = [line for line in handle if line.strip()]
                    found.extend((schema, shortened(json.loads(line))) for line in lines[:2])
                else:
                    found.append((schema, shortened(json.load(handle))))

        load("topology.schema.json", os.path.join(SOURCE_DIR, "tests", "scripts", "data", "topology_rtxpro.json"))
        apps = os.path.join(BINARY_DIR, "bench", "apps")
        topo_map = os.path.join(apps, "topo_map")
        if os.path.exists(topo_map):
            data = os.path.join(SOURCE_DIR, "tests", "data", "topology")
            for xml in ("rtxpro_2socket.xml", "pcie_box_2level.xml"):
                out = os.path.join(self.tmp, xml + ".json")
                subprocess.run([topo_map, "--xml", os.path.join(data, xml), "--sysfs-root", os.path.join(data, "sysfs"),
                                "--json", out], capture_output=True, timeout=60, check=True)
                load("topology.schema.json", out)
        evidence = os.path.join(apps, "nccl_evidence")
        if os.path.exists(evidence):
            logs = os.path.join(SOURCE_DIR, "tests", "data", "evidence", "logs")
            for scenario in ("ib_gdr_two_rails", "socket_fallback"):
                out = os.path.join(self.tmp, scenario + ".json")
                subprocess.run([evidence, "--expect", "inter=NET/IB+GDRDMA,intra=P2P", "--json", out,
                                os.path.join(logs, scenario)], capture_output=True, timeout=60)
                load("nccl_evidence.schema.json", out)
        coll_perf = os.path.join(apps, "coll_perf")
        mpirun = shutil.which("mpirun")
        if os.path.exists(coll_perf) and mpirun:
            env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
            out = os.path.join(self.tmp, "coll.json")
            subprocess.run([mpirun, "--oversubscribe", "-np", "2", coll_perf, "--backend", "mpi", "-b", "8K", "-e", "16K",
                            "-n", "2", "-w", "1", "-J", out, "--jsonl", out + "l", "--quiet"],
                           capture_output=True, timeout=120, check=True, env=env)
            load("coll_perf.schema.json", out)
            load("case_record.schema.json", out + "l")
        plan = os.path.join(self.tmp, "plan.json")
        hosts = os.path.join(self.tmp, "hosts")
        with open(hosts, "w", encoding="utf-8") as handle:
            handle.write("node5 slots=8\nnode7 slots=8\n")
        result = run_cli(["plan", "--hostfile", hosts, "--hcas", "mlx5_0:1,mlx5_3:1", "--run-id", "R1", "--results", self.results, "--json", plan])
        self.assertEqual(result.returncode, 0, result.stderr)
        load("plan.schema.json", plan)
        return found

    def test_same_verdicts(self):
        documents = self.produce()
        self.assertGreaterEqual(len({name for name, _ in documents}), 2, "too few producers ran")
        validators = {}
        rng = random.Random(14)
        checked = rejected = 0
        for name, document in documents:
            if name not in validators:
                path = os.path.join(SCHEMA_DIR, name)
                with open(path, encoding="utf-8") as handle:
                    schema = json.load(handle)
                store = validate_json.sibling_store(path)
                validators[name] = (validate_json.make_validator("jsonschema", schema, store),
                                    validate_json.make_validator("stdlib", schema, store))
            reference, subset = validators[name]
            self.assertEqual(list(reference(document)), [], f"{name}: a document our tool wrote must validate")
            self.assertEqual(list(subset(document)), [], name)
            for path, variant in mutations(document, rng, 40):
                expected = next(reference(variant), None) is None
                self.assertEqual(next(subset(variant), None) is None, expected, f"{name}: mutation at {path}")
                checked += 1
                rejected += not expected
        # The mutations exercise both verdicts, not only one.
        self.assertGreater(rejected, checked // 4, (rejected, checked))
        self.assertGreater(checked - rejected, 0, (rejected, checked))


if __name__ == "__main__":
    unittest.main()
