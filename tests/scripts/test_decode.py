"""--decode (the model's message sizes) and --ab (algorithm/protocol A/B with a verdict): the plan for the
target cluster with sizes checked against hand-computed values, bad specs, the verdict on synthetic records,
the report's tables, and one real end-to-end decode run on the MPI backend (skipped when not built)."""
import json
import os
import shlex
import shutil
import unittest

from case_records import case_record, repeat_records, write_run_dir
from helpers import BINARY_DIR, TempDirTest, read_jsonl, read_text, run_cli, validate, verdict_fail_codes

from cclbench_lib.render.decode import band_sentence
from cclbench_lib.rules.ab import ab_verdicts, choose_binding

# Hand-computed: DeepSeek hidden 7168, bfloat16 (2 bytes): 7168 x 2 = 14336 bytes per token.
ALL_REDUCE_7168 = {1: 14336, 2: 28672, 4: 57344, 8: 114688, 16: 229376, 32: 458752, 64: 917504}
# alltoall with topk 8: 14336 x 8 = 114688 bytes per token.
ALLTOALL_7168_TOP8 = {1: 114688, 2: 229376, 4: 458752, 8: 917504, 16: 1835008, 32: 3670016, 64: 7340032}
DECODE = "hidden=7168,dtype=bfloat16,batches=1,2,4,8,16,32,64,collectives=all_reduce,alltoall,per_step=122,topk=8"


def words(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv else None


class ClusterPlan(TempDirTest):
    """2 hosts x 8 GPUs, the user's two rails: what `plan --decode --ab` prints, exactly."""

    def plan(self, *extra, env=None):
        result = run_cli(["plan", "--hosts", "node5,node7", "--gpus-per-node", "8", "--hcas", "mlx5_0:1,mlx5_3:1",
                          "--run-id", "R1", "--results", self.results, "--bin-dir", "/opt/cclbench/bin",
                          "--mpirun", "mpirun", "--repeat", "1"] + list(extra), env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        return [shlex.split(line) for line in result.stdout.splitlines()], result.stderr

    def decode_launches(self, every):
        return {words(argv, "--point"): argv for argv in every
                if (words(argv, "--point") or "").startswith("decode.") and "--tuning-probe" not in argv}

    def test_decode_points_have_the_models_exact_sizes(self):
        every, notes = self.plan("--decode", DECODE)
        points = self.decode_launches(every)
        self.assertEqual(sorted(points), sorted(
            f"decode.{c}.{scope}" for c in ("all_reduce", "alltoall")
            for scope in ("intra.node5", "intra.node7", "inter.best")))
        for name, argv in points.items():
            expected = ALL_REDUCE_7168 if ".all_reduce." in name else ALLTOALL_7168_TOP8
            self.assertEqual([int(s) for s in words(argv, "--sizes").split(",")], [expected[b] for b in sorted(expected)])
            self.assertNotIn("-b", argv)
            self.assertEqual(words(argv, "--coll"), "all_reduce" if ".all_reduce." in name else "alltoall")
            self.assertEqual(words(argv, "-d"), "bfloat16")
            self.assertEqual(words(argv, "-G"), "10", "decode runs in CUDA-graph mode")
            self.assertIn("--tuning-from", argv, "NCCL's algorithm/protocol comes from the untimed probe")
            if ".inter." in name:
                self.assertEqual(words(argv, "-np"), "16")
                self.assertEqual(words(argv, "--host"), "node5:8,node7:8")
                exported = [argv[i + 1] for i, w in enumerate(argv) if w == "-x"]
                self.assertEqual(sorted(exported), ["NCCL_CROSS_NIC=1", "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1"])
            else:
                self.assertEqual(words(argv, "-np"), "8")
                self.assertEqual(words(argv, "--host"), name.split(".intra.")[1] + ":8")
                self.assertNotIn("-x", argv)
        probes = [argv for argv in every if "--tuning-probe" in argv and (words(argv, "--point") or "").startswith("decode.")]
        self.assertEqual(len(probes), 6)
        self.assertTrue(all("-G" not in argv and words(argv, "--sizes") for argv in probes))
        self.assertIn("b1:14336", notes)
        self.assertIn("b64:917504", notes)
        self.assertIn("b64:7340032", notes)
        self.assertIn("production binding", notes)

    def test_ab_cross_product_beside_the_decode_points(self):
        every, notes = self.plan("--decode", "hidden=7168,batches=1,64", "--ab", "NCCL_ALGO=Ring,Tree",
                                 "--ab", "NCCL_PROTO=Simple,LL,LL128", "--json",
                                 os.path.join(self.tmp, "plan.json"))
        points = self.decode_launches(every)
        variants = {name: argv for name, argv in points.items() if ".ab." in name}
        # 6 combinations beside the first node's decode point and the one over the rails (not node7's).
        self.assertEqual(len(variants), 12)
        self.assertFalse([name for name in variants if "node7" in name])
        expected = {f"NCCL_ALGO={a} NCCL_PROTO={p}" for a in ("Ring", "Tree") for p in ("Simple", "LL", "LL128")}
        for base in ("decode.all_reduce.intra.node5", "decode.all_reduce.inter.best"):
            mine = [argv for name, argv in variants.items() if name.startswith(base + ".ab.")]
            seen = {" ".join(sorted(argv[i + 1] for i, w in enumerate(argv) if w == "-x" and argv[i + 1].startswith(
                ("NCCL_ALGO", "NCCL_PROTO")))) for argv in mine}
            self.assertEqual(seen, expected)
            for argv in mine:  # same sizes and flags as the automatic point
                self.assertEqual(words(argv, "--sizes"), words(points[base], "--sizes"))
                self.assertEqual(words(argv, "-G"), "10")
        self.assertIn("--ab: 6 variant(s)", notes)
        with open(os.path.join(self.tmp, "plan.json")) as handle:
            document = json.load(handle)
        ab = [launch for launch in document["launches"] if launch.get("ab")]
        self.assertEqual({launch["ab"]["of"] for launch in ab},
                         {"decode.all_reduce.intra.node5", "decode.all_reduce.inter.best"})
        ok, errors = validate("plan.schema.json", os.path.join(self.tmp, "plan.json"))
        self.assertTrue(ok, errors)

    def test_ab_without_decode_goes_beside_the_first_intra_and_inter_point(self):
        every, _ = self.plan("--ab", "NCCL_PROTO=Simple,LL")
        names = [words(argv, "--point") for argv in every if ".ab." in (words(argv, "--point") or "")
                 and "--tuning-probe" not in argv]
        self.assertEqual(sorted(names), sorted(f"{base}.ab.PROTO-{p}" for base in ("intra.node5", "inter.cross0.rails-both")
                                                for p in ("Simple", "LL")))

    def test_bad_specs_are_one_line_errors(self):
        base = ["plan", "--hosts", "node5,node7", "--gpus-per-node", "8", "--hcas", "mlx5_0:1,mlx5_3:1",
                "--bin-dir", "/opt/cclbench/bin", "--results", self.results]
        cases = [
            (["--decode", "dtype=bfloat16,batches=1,2"], "needs hidden=H and batches"),
            (["--decode", "hidden=7168"], "needs hidden=H and batches"),
            (["--decode", "hidden=7168,batches=1,x"], "batches=x is not a whole number"),
            (["--decode", "hidden=7168,batches=0"], "out of range"),
            (["--decode", "hidden=7168,batches=1,1"], "lists a batch twice"),
            (["--decode", "hidden=7168,batches=1,dtype=int4"], "dtype=int4 is unknown"),
            (["--decode", "hidden=7168,batches=1,colour=red"], "unknown key 'colour'"),
            (["--decode", "hidden=7168,hidden=4096,batches=1"], "hidden given twice"),
            (["--decode", "hidden=7168,batches=1,collectives=alltoall"], "give topk=K"),
            (["--decode", "hidden=7168,batches=1,topk=8"], "topk only sizes alltoall"),
            (["--decode", "hidden=7168,batches=1,collectives=broadcast"], "not a decode collective"),
            (["--decode", "7168"], "is not key=value"),
            (["--decode", "hidden=7168,batches=1,per_step="], "per_step= has no value"),
            # 7000 x 1 x 1 x 2 = 14000 bytes of alltoall: 875 bytes per rank over 16, not whole bf16 elements.
            (["--decode", "hidden=7000,batches=1,collectives=alltoall,topk=1"], "not a whole number of bfloat16"),
            (["--ab", "ALGO=Ring"], "is not an NCCL_* variable"),
            (["--ab", "NCCL_ALGO"], "is not NCCL_VAR=value"),
            (["--ab", "NCCL_ALGO=Ring,"], "is empty"),
            (["--ab", "NCCL_ALGO=Ring", "--ab", "NCCL_ALGO=Tree"], "given twice"),
            (["--ab", "NCCL_ALGO=Ring,Tree,CollnetDirect", "--ab", "NCCL_PROTO=Simple,LL,LL128",
              "--ab", "NCCL_MIN_NCHANNELS=1,2"], "18 combinations exceed the limit of 12"),
        ]
        for extra, message in cases:
            with self.subTest(extra=extra):
                self.assertOneLineError(run_cli(base + extra), code=2, contains=message)


class LocalPlans(TempDirTest):
    def plan(self, gpus, *extra):
        result = run_cli(["plan", "--results", self.results, "--run-id", "L", "--bin-dir", "/opt/cclbench/bin",
                          "--mpirun", "mpirun", "--repeat", "1"] + list(extra), env={"CCLBENCH_FAKE_GPU_COUNT": str(gpus)})
        self.assertEqual(result.returncode, 0, result.stderr)
        return {words(argv, "--point"): argv for argv in map(shlex.split, result.stdout.splitlines())
                if "--tuning-probe" not in argv and words(argv, "--point")}, result.stderr

    def test_mpi_backend_decode_is_eager_and_ignores_ab(self):
        points, notes = self.plan(0, "--decode", "hidden=7168,batches=1,64", "--ab", "NCCL_PROTO=LL,Simple")
        argv = points["decode.all_reduce.local.mpi4"]
        self.assertEqual(words(argv, "--sizes"), "14336,917504")
        self.assertEqual(words(argv, "--backend"), "mpi")
        self.assertEqual(words(argv, "-d"), "int8", "MPI has no bfloat16: the same bytes as int8")
        self.assertNotIn("-G", argv, "CUDA graphs need NCCL")
        self.assertFalse([name for name in points if ".ab." in name])
        self.assertIn("--ab ignored: the MPI backend runs no NCCL", notes)

    def test_one_gpu_decode_graph_point_and_emulated_ranks(self):
        points, _ = self.plan(1, "--decode", "hidden=7168,batches=1,64", "--ab", "NCCL_PROTO=LL,Simple")
        one = points["decode.all_reduce.local.gpu1"]
        self.assertEqual((words(one, "-np"), words(one, "-G"), words(one, "-d")), ("1", "10", "bfloat16"))
        emulated = points["decode.all_reduce.share-gpu4"]
        self.assertEqual((words(emulated, "-np"), words(emulated, "-G")), ("4", "1"))  # correctness only: one replay
        self.assertIn("--share-gpu", emulated)
        # With --ab the emulated point is judged against its variants: the baseline's iterations, not the check's.
        self.assertEqual(words(emulated, "-n"), words(one, "-n"))
        for argv in (one, emulated):
            self.assertEqual(words(argv, "--placement"), "out", "pynccl calls NCCL out of place inside graphs")
        # A/B only where NCCL has a choice: the emulated ranks, not the single rank.
        self.assertEqual(sorted(name for name in points if ".ab." in name),
                         ["decode.all_reduce.share-gpu4.ab.PROTO-LL", "decode.all_reduce.share-gpu4.ab.PROTO-Simple"])

    def test_one_gpu_emulated_decode_without_ab_is_a_single_short_check(self):
        result = run_cli(["plan", "--results", self.results, "--run-id", "L", "--bin-dir", "/opt/cclbench/bin",
                          "--mpirun", "mpirun", "--repeat", "3", "-n", "20", "-w", "5", "--decode",
                          "hidden=7168,batches=1,64"], env={"CCLBENCH_FAKE_GPU_COUNT": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        points = [words(argv, "--point") for argv in map(shlex.split, result.stdout.splitlines())
                  if "--tuning-probe" not in argv and words(argv, "--point")]
        argv_of = {words(argv, "--point"): argv for argv in map(shlex.split, result.stdout.splitlines())}
        # The one-rank decode point is timed three times; the emulated one runs once, 2 iterations after 1 warmup.
        self.assertEqual([p for p in points if p.startswith("decode.all_reduce.local.gpu1")],
                         [f"decode.all_reduce.local.gpu1.rep{k}" for k in (1, 2, 3)])
        self.assertEqual([p for p in points if p.startswith("decode.all_reduce.share-gpu4")],
                         ["decode.all_reduce.share-gpu4"])
        emulated = argv_of["decode.all_reduce.share-gpu4"]
        self.assertEqual((words(emulated, "-n"), words(emulated, "-w")), ("2", "1"))
        self.assertEqual(words(argv_of["decode.all_reduce.local.gpu1.rep2"], "-n"), "20")


def rec(point, size, time_us, collective="all_reduce", status="ok", reason=None, emulated=False):
    ok = status == "ok"
    return case_record(point, f"{collective}.bfloat16.sum.out.{size}", size,
                       {"mean": time_us, "p50": time_us, "p99": time_us} if ok else None, time_us if ok else None,
                       status=status, reason=reason, nranks=8, emulated=emulated, graph_launches=10)


def ab_launches(variants):
    launches = [{"name": "auto", "base_point": "auto"}]
    for label, env in variants.items():
        launches.append({"name": label, "base_point": label, "ab": {"of": "auto", "variant": env}})
    return launches


SIZES = [16 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20]


class AbVerdict(unittest.TestCase):
    """ab_verdicts + band_sentence on synthetic records; three repeats a side, spread +-1%."""

    def repeats(self, point, size, centre, spread=0.01, **kwargs):
        return repeat_records(point, [centre * (1 - spread), centre, centre * (1 + spread)],
                              lambda name, time_us: rec(name, size, time_us, **kwargs))

    def test_within_noise(self):
        # Repeats +-2%: s = 0.02 both sides, band = 4 x 1.2533 x 0.02 x sqrt(2/3) = 8.2%; automatic is 3% slower
        # than Ring (10.3 against 10.0), beyond the 2% threshold but inside the band: within noise.
        records = []
        for size in SIZES:
            records += self.repeats("auto", size, 10.3, 0.02) + self.repeats("ring", size, 10.0, 0.02)
            records += self.repeats("tree", size, 13.0, 0.02)
        bands, unmeasured = ab_verdicts(records, ab_launches({"ring": {"NCCL_ALGO": "Ring"}, "tree": {"NCCL_ALGO": "Tree"}}))
        self.assertEqual(unmeasured, [])
        self.assertEqual(len(bands), 1)
        self.assertEqual(band_sentence(bands[0]), "automatic is within noise of the best variant at 16K-1M")

    def test_slower_in_a_band_is_named_with_its_variant_and_sizes(self):
        records = []
        ll128 = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL128"}
        for size in SIZES:
            # automatic is 25% slower than Ring/LL128 at 64K..512K (12.5 against 10.0), equal elsewhere.
            auto = 12.5 if (64 << 10) <= size <= (512 << 10) else 10.0
            records += self.repeats("auto", size, auto) + self.repeats("ll128", size, 10.0)
            records += self.repeats("simple", size, 11.0)
        bands, _ = ab_verdicts(records, ab_launches({"ll128": ll128, "simple": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}}))
        sentences = [band_sentence(band) for band in bands]
        self.assertEqual(sentences, ["automatic is within noise of the best variant at 16K",
                                     "automatic is 25% slower than NCCL_ALGO=Ring NCCL_PROTO=LL128 at 64K-512K",
                                     "automatic is within noise of the best variant at 1M"])

    def test_faster_and_rejected_variants(self):
        records = []
        for size in SIZES[:2]:
            records += self.repeats("auto", size, 10.0) + self.repeats("ll", size, 14.0)
            records += [rec(f"tree.rep{k}", size, None, status="error",
                            reason="NCCL error: invalid usage") for k in (1, 2, 3)]
        bands, unmeasured = ab_verdicts(records, ab_launches({"ll": {"NCCL_PROTO": "LL"}, "tree": {"NCCL_ALGO": "Tree"}}))
        self.assertEqual([band_sentence(band) for band in bands], ["automatic is faster than every variant at 16K-64K"])
        self.assertEqual(len(unmeasured), 1)
        self.assertEqual(unmeasured[0]["variant"], {"NCCL_ALGO": "Tree"})
        self.assertIn("invalid usage", unmeasured[0]["reason"])

    def test_emulated_points_are_judged_against_emulated_only_and_labelled(self):
        records = []
        for size in SIZES[:1]:
            records += self.repeats("auto", size, 20.0, emulated=True) + self.repeats("simple", size, 10.0, emulated=True)
            records += self.repeats("gpu", size, 1.0)  # a real-GPU variant is never set against emulated ranks
        bands, _ = ab_verdicts(records, ab_launches({"simple": {"NCCL_PROTO": "Simple"}, "gpu": {"NCCL_PROTO": "LL"}}))
        self.assertEqual([band_sentence(band) for band in bands],
                         ["automatic is 100% slower than NCCL_PROTO=Simple at 16K (emulated ranks: about this emulation "
                          "over sockets on one GPU, not a fabric)"])

    def test_one_repeat_a_side_only_calls_large_differences(self):
        records = []
        for size in SIZES[:1]:
            records += [rec("auto", size, 11.0), rec("ll", size, 10.0)]  # 10% apart, one repeat: unknown noise
        bands, _ = ab_verdicts(records, ab_launches({"ll": {"NCCL_PROTO": "LL"}}))
        self.assertEqual(bands[0]["verdict"], "inconclusive")
        records = [rec("auto", SIZES[0], 14.0), rec("ll", SIZES[0], 10.0)]  # 40%: beyond the 15% floor
        bands, _ = ab_verdicts(records, ab_launches({"ll": {"NCCL_PROTO": "LL"}}))
        self.assertEqual(band_sentence(bands[0]), "automatic is 40% slower than NCCL_PROTO=LL at 16K")

    def test_repeats_that_scatter_widely_are_inconclusive_not_within_noise(self):
        # Repeats that scatter 2x (as 4 emulated ranks time-slicing one H200 did): 20% apart in the medians, far
        # inside the noise band, so no verdict may call the two alike.
        records = [rec(f"auto.rep{k}", 917504, t, emulated=True) for k, t in enumerate((30.0, 30.0, 60.0), 1)]
        records += [rec(f"simple.rep{k}", 917504, t, emulated=True) for k, t in enumerate((25.0, 25.0, 50.0), 1)]
        bands, _ = ab_verdicts(records, ab_launches({"simple": {"NCCL_PROTO": "Simple"}}))
        self.assertEqual(bands[0]["verdict"], "inconclusive")
        sentence = band_sentence(bands[0])
        self.assertTrue(sentence.startswith("inconclusive at 896K: the repeats scatter too much"), sentence)
        self.assertIn("(automatic +20% against the best variant)", sentence)  # medians 30 / 25

    def test_forced_ll_on_emulated_ranks_is_called_slower(self):
        # The H200 run (4 emulated ranks, NCCL_PROTO=LL forced, all_reduce 896K, gated us): every automatic repeat
        # is slower than every Simple one and the medians differ 4x, beyond the scatter.
        auto = [108268.2, 108278.4, 54182.52]
        simple = [27112.52, 27115.71, 40624.26]
        records = [rec(f"auto.rep{k}", 917504, t, emulated=True) for k, t in enumerate(auto, 1)]
        records += [rec(f"simple.rep{k}", 917504, t, emulated=True) for k, t in enumerate(simple, 1)]
        bands, _ = ab_verdicts(records, ab_launches({"simple": {"NCCL_PROTO": "Simple"}}))
        self.assertEqual(band_sentence(bands[0]), "automatic is 299% slower than NCCL_PROTO=Simple at 896K (emulated "
                                                  "ranks: about this emulation over sockets on one GPU, not a fabric)")

    def test_probe_launches_of_a_variant_are_not_variants(self):
        records = []
        for size in SIZES[:1]:
            records += self.repeats("auto", size, 20.0) + self.repeats("simple", size, 10.0)
        launches = ab_launches({"simple": {"NCCL_PROTO": "Simple"}})
        launches.append({"name": "tuning.simple", "kind": "tuning", "ab": {"of": "auto", "variant": {"NCCL_PROTO": "Simple"}}})
        bands, unmeasured = ab_verdicts(records, launches)
        self.assertEqual(unmeasured, [], "the TUNING probe of a variant is no unmeasured variant")
        self.assertEqual([band_sentence(band) for band in bands], ["automatic is 100% slower than NCCL_PROTO=Simple at 16K"])


class DecodeReport(TempDirTest):
    def test_decode_table_and_ab_section(self):
        run = os.path.join(self.tmp, "R")
        os.makedirs(os.path.join(run, "nccl", "d.ab.ALGO-Tree.rep1"))
        with open(os.path.join(run, "nccl", "d.ab.ALGO-Tree.rep1", "h.1.log"), "w") as handle:
            handle.write("h:1:1 [0] NCCL INFO init\nh:1:1 [0] enqueue.cc:1 NCCL WARN Error : no algorithm/protocol "
                         "available for function AllGather with datatype ncclBfloat16. NCCL_ALGO was set to Tree.\n")
        decode = {"collective": "all_reduce", "hidden": 7168, "dtype": "bfloat16", "element_bytes": 2, "topk": None,
                  "per_step": 122, "batches": [1, 64], "sizes": [14336, 917504]}
        plan = []
        records = []
        for k in (1, 2, 3):
            for name, extra in (("d", {}), ("d.ab.PROTO-LL", {"ab": {"of": "d", "variant": {"NCCL_PROTO": "LL"}}}),
                                ("d.ab.ALGO-Tree", {"ab": {"of": "d", "variant": {"NCCL_ALGO": "Tree"}}})):
                plan.append(dict({"name": f"{name}.rep{k}", "base_point": name, "kind": "local", "nranks": 8,
                                  "argv": ["coll_perf", "-G", "10"], "hosts": ["h"], "env": {}, "outputs": [],
                                  "collectives": ["all_reduce"], "sizes": [14336, 917504], "decode": decode}, **extra))
                if k == 1 and extra:  # the variant's untimed TUNING probe carries 'ab' too, and no base_point
                    plan.append(dict({"name": f"tuning.{name}", "kind": "tuning", "nranks": 8, "argv": ["coll_perf"],
                                      "hosts": ["h"], "env": {}, "outputs": []}, **extra))
            for size, auto in ((14336, 20.0), (917504, 40.0)):
                records.append(dict(rec(f"d.rep{k}", size, auto + 0.1 * k),
                                    evidence={"tuning": [{"algorithm": "RING", "protocol": "LL"}]}))
                records.append(rec(f"d.ab.PROTO-LL.rep{k}", size, auto * (0.5 if size == 917504 else 1.0) + 0.1 * k))
                records.append(rec(f"d.ab.ALGO-Tree.rep{k}", size, None, status="error", reason="internal error"))
        write_run_dir(run, plan, records, point_kind="local")
        result = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        text = read_text(os.path.join(run, "report.md"))
        section = text[text.index("## Decode communication"):text.index("## Algorithm / protocol A/B")]
        self.assertIn("### d (all_reduce, hidden 7168, bfloat16, 8 rank(s), CUDA graph (-G))", section)
        # batch 1: median 20.2 us; per step 122 x 20.2 = 2464.4 us.
        self.assertIn("| 1 | 14336 | 20.20 | 20.20 / 20.20 | 1.00 | RING/LL | 2,464 |", section)
        self.assertIn("| 64 | 917504 | 40.20 | 40.20 / 40.20 | 1.00 | RING/LL | 4,904 |", section)
        ab = text[text.index("## Algorithm / protocol A/B"):]
        self.assertIn("automatic is within noise of the best variant at 14K", ab)
        self.assertIn("automatic is 99% slower than NCCL_PROTO=LL at 896K", ab)  # 40.2 / 20.2 - 1
        self.assertIn("| all_reduce | 896K | 40.20 | 20.20 (-50%) | - |", ab)
        self.assertIn("| collective | size | automatic | NCCL_PROTO=LL | NCCL_ALGO=Tree |", ab)
        self.assertIn("NCCL_ALGO=Tree beside d: not measured: Error : no algorithm/protocol available for function "
                      "AllGather", ab)


class DecodeOneRankReport(TempDirTest):
    def test_one_rank_busbw_is_no_figure(self):
        run = os.path.join(self.tmp, "R1")
        decode = {"collective": "all_reduce", "hidden": 7168, "dtype": "bfloat16", "element_bytes": 2, "topk": None,
                  "per_step": None, "batches": [1], "sizes": [14336]}
        plan = [{"name": "d1", "base_point": "d1", "kind": "local", "nranks": 1, "argv": ["coll_perf", "-G", "10"],
                 "hosts": ["h"], "env": {}, "outputs": [], "collectives": ["all_reduce"], "sizes": [14336],
                 "decode": decode}]
        record = dict(rec("d1", 14336, 1.5), nranks=1, busbw_gbps=0.0)
        write_run_dir(run, plan, [record])
        result = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        text = read_text(os.path.join(run, "report.md"))
        self.assertIn("| 1 | 14336 | 1.50 | 1.50 / 1.50 | - (1 rank) | - |", text)
        self.assertIn("_NCCL algo/proto '-': one rank: NCCL runs no algorithm across ranks", text)

    def test_alltoall_without_a_choice_says_why_from_the_records(self):
        run = os.path.join(self.tmp, "R4")
        decode = {"collective": "alltoall", "hidden": 7168, "dtype": "bfloat16", "element_bytes": 2, "topk": 8,
                  "per_step": None, "batches": [1, 2], "sizes": [114688, 229376]}
        plan = [{"name": "a4", "base_point": "a4", "kind": "local", "nranks": 4,
                 "argv": ["coll_perf", "-G", "10", "--tuning-from", "t.json"], "hosts": ["h"], "env": {},
                 "outputs": [], "collectives": ["alltoall"], "sizes": [114688, 229376], "decode": decode}]
        why = "NCCL runs alltoall as grouped send/recv: no algorithm choice is logged"  # the H200 record's words
        records = [dict(rec("a4", size, 9.0, collective="alltoall"), nranks=4,
                        evidence={"tuning": None, "tuning_reason": why}) for size in (114688, 229376)]
        write_run_dir(run, plan, records)
        result = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        text = read_text(os.path.join(run, "report.md"))
        section = text[text.index("## Decode communication"):]
        self.assertIn(f"_NCCL algo/proto '-': {why}_", section)
        # A table whose every size has NCCL's choice carries no such line.
        chosen = [dict(r, evidence={"tuning": [{"algorithm": "RING", "protocol": "LL"}]}) for r in records]
        write_run_dir(run, plan, chosen)
        result = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("NCCL algo/proto '-'", read_text(os.path.join(run, "report.md")))


class DecodeBindingSentence(TempDirTest):
    """Over the rails the decode point runs with the production binding; the report says how that binding did
    against the sweep's fastest at the sweep sizes spanning the decode sizes."""

    def report(self, cross1_us):
        run = os.path.join(self.tmp, "RB")
        both = "=mlx5_0:1,mlx5_3:1"
        sweep = {"inter.cross0.rails-both": {"NCCL_CROSS_NIC": "0", "NCCL_IB_HCA": both},
                 "inter.cross1.rails-both": {"NCCL_CROSS_NIC": "1", "NCCL_IB_HCA": both}}
        decode = {"collective": "all_reduce", "hidden": 7168, "dtype": "bfloat16", "element_bytes": 2, "topk": None,
                  "per_step": None, "batches": [1, 64], "sizes": [14336, 917504]}
        plan, records = [], []
        for k in (1, 2, 3):
            for base, env in sweep.items():
                plan.append({"name": f"{base}.rep{k}", "base_point": base, "kind": "inter", "nranks": 16,
                             "argv": ["coll_perf"], "hosts": ["a", "b"], "env": env, "outputs": []})
            plan.append({"name": f"d.rep{k}", "base_point": "d", "kind": "inter", "nranks": 16,
                         "argv": ["coll_perf", "-G", "10"], "hosts": ["a", "b"], "env": sweep["inter.cross1.rails-both"],
                         "outputs": [], "collectives": ["all_reduce"], "sizes": decode["sizes"], "decode": decode})
            spread = (0.99, 1.0, 1.01)[k - 1]
            for size in [4096 << n for n in range(11)]:  # 4K .. 4M
                records.append(rec(f"inter.cross0.rails-both.rep{k}", size, 10.0 * spread))
                records.append(rec(f"inter.cross1.rails-both.rep{k}", size, cross1_us * spread))
            for size in decode["sizes"]:
                records.append(rec(f"d.rep{k}", size, 11.0 * spread))
        write_run_dir(run, plan, records, point_kind="inter")
        result = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        return read_text(os.path.join(run, "report.md"))

    def test_production_binding_slower_than_the_sweeps_fastest(self):
        # Sweep sizes spanning 14336..917504: 8K (largest <= 14336) to 1M (smallest >= 917504), 8 sizes. Every one
        # 12 against 10 us: 20% slower, beyond a band of 4 x 1.2533 x 1% x sqrt(2/3) = 4.1% at each size.
        text = self.report(12.0)
        self.assertIn("_Binding over the rails at the decode sizes (all_reduce) (eager sweep, 8K-1M, 8 size(s), "
                      "2 bindings): the sweep's fastest is inter.cross0.rails-both (NCCL_CROSS_NIC=0 "
                      "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1); this point's binding, inter.cross1.rails-both, is 20% slower "
                      "there (geometric mean), beyond noise at 8 of 8 size(s)._", text)

    def test_production_binding_that_is_the_fastest_says_so(self):
        text = self.report(9.0)
        self.assertIn("this point's binding, inter.cross1.rails-both (NCCL_CROSS_NIC=1 NCCL_IB_HCA==mlx5_0:1,"
                      "mlx5_3:1), is the sweep's fastest._", text)


class FakeTwoNodeRun(TempDirTest):
    """The whole path with the test doubles (fake mpirun and coll_perf), two 'nodes': decode points, an A/B whose
    NCCL_PROTO=Simple variant is 2x faster and whose NCCL_ALGO=Tree variant NCCL refuses."""

    def test_decode_and_ab_baseline_report(self):
        result = run_cli(["baseline", "--hosts", "localhost,127.0.0.1", "--gpus-per-node", "8", "--hcas",
                          "mlx5_0:1,mlx5_3:1", "-b", "8K", "-e", "8K", "-n", "3", "-w", "1", "--repeat", "2",
                          "--cross-nic", "1", "--decode", "hidden=7168,batches=1,64,per_step=122",
                          "--ab", "NCCL_ALGO=Ring,Tree", "--ab", "NCCL_PROTO=Simple"] + self.fake_args("F"),
                         env={"FAKE_COLL_FAST_ENV": "NCCL_PROTO=Simple:0.5", "FAKE_COLL_NCCL_REJECT": "NCCL_ALGO=Tree",
                              "CCLBENCH_NO_MATPLOTLIB": "1"})
        run = os.path.join(self.results, "F")
        # The refused variant is a finding, not a failed baseline: the run fails on this machine's doctor alone
        # (NCCL_IB_HCA names mlx5_0 and mlx5_3, absent here).
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(verdict_fail_codes(run), ["doctor.fail"])
        with open(os.path.join(run, "run_manifest.json")) as handle:
            manifest = json.load(handle)
        failed = sorted(name for name, state in manifest["points"].items() if state["status"] != "complete")
        self.assertTrue(failed and all(".ab.ALGO-Tree" in name for name in failed), failed)
        records = read_jsonl(os.path.join(run, "cases.jsonl"))
        decode = {(r["point"], r["requested_bytes"]) for r in records if r["point"].startswith("decode.") and not r["in_place"]}
        self.assertIn(("decode.all_reduce.inter.best.rep1", 14336), decode)
        self.assertIn(("decode.all_reduce.intra.localhost.rep2", 917504), decode)
        self.assertEqual({r["dtype"] for r in records if r["point"].startswith("decode.")}, {"bfloat16"})
        text = read_text(os.path.join(run, "report.md"))
        self.assertIn("## Decode communication", text)
        ab = text[text.index("## Algorithm / protocol A/B"):]
        for base in ("decode.all_reduce.intra.localhost", "decode.all_reduce.inter.best"):
            self.assertIn(f"| {base} | all_reduce | 14K-896K | automatic is 100% slower than NCCL_ALGO=Ring "
                          "NCCL_PROTO=Simple at 14K-896K |", ab)
            self.assertIn(f"- NCCL_ALGO=Tree NCCL_PROTO=Simple beside {base}: not measured: Error : no algorithm/protocol "
                          "available for function AllReduce with datatype ncclBfloat16. NCCL_ALGO was set to Tree. "
                          "(NCCL's log)", ab)


BOTH = {"NCCL_CROSS_NIC": "1", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}  # the production binding
RAIL0 = {"NCCL_CROSS_NIC": "1", "NCCL_IB_HCA": "=mlx5_0:1"}
# The baseline's sweep runs each rail alone once, without NCCL_CROSS_NIC (one NIC: nothing to choose between).
RAIL0_ALONE = {"NCCL_IB_HCA": "=mlx5_0:1"}
CROSS0 = {"NCCL_CROSS_NIC": "0", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}
SWEEP = {"inter.cross1.rails-both": BOTH, "inter.cross1.rail-mlx5_0": RAIL0, "inter.cross0.rails-both": CROSS0}


def sweep_records(times_us, repeats=3, sizes=(8192, 16384, 1048576, 2097152)):
    """{binding: time} -> records of each sweep binding at `sizes`, `repeats` repeats with a 1% spread."""
    return [rec(f"{base}.rep{k}", size, time_us * (1 + 0.01 * (k - 2)))
            for base, time_us in times_us.items() for size in sizes for k in range(1, repeats + 1)]


class BindingChoice(unittest.TestCase):
    """rules/ab.choose_binding: the binding a decode point over the rails runs with, from the sweep's records."""

    def choose(self, records, production=BOTH, sizes=(14336, 917504), sweep=None):
        return choose_binding(records, sweep or SWEEP, "all_reduce", list(sizes), production)

    def test_a_binding_faster_beyond_noise_at_every_size_is_chosen(self):
        base, env, reason = self.choose(sweep_records({"inter.cross1.rails-both": 30.0, "inter.cross1.rail-mlx5_0": 20.0,
                                                       "inter.cross0.rails-both": 25.0}))
        self.assertEqual((base, env), ("inter.cross1.rail-mlx5_0", RAIL0))
        # 30 / 20 - 1 = 50% at all three spanning sizes (8K, 16K, 1M; 2M lies beyond the nearest size above 896K).
        self.assertIn("production binding is 50% slower, beyond noise at 3 of 3 size(s)", reason)

    def test_of_bindings_within_noise_of_the_fastest_the_closest_to_production_is_chosen(self):
        # A dead rail mlx5_3: every binding without it is about equally fast; the 1% between the two that use
        # mlx5_0 alone is inside the noise (3 repeats, 1% spread), so the one that keeps NCCL_CROSS_NIC=1 is taken.
        sweep = dict(SWEEP, **{"inter.cross0.rail-mlx5_0": {"NCCL_CROSS_NIC": "0", "NCCL_IB_HCA": "=mlx5_0:1"}})
        base, env, reason = self.choose(sweep_records({"inter.cross1.rails-both": 30.0, "inter.cross1.rail-mlx5_0": 20.2,
                                                       "inter.cross0.rail-mlx5_0": 20.0, "inter.cross0.rails-both": 30.0}),
                                        sweep=sweep)
        self.assertEqual((base, env), ("inter.cross1.rail-mlx5_0", RAIL0))
        self.assertIn("within noise of the sweep's fastest, inter.cross0.rail-mlx5_0, and the closest to the production "
                      "binding (1 variable(s) changed", reason)
        self.assertIn("the production binding is 49% slower, beyond noise at 3 of 3", reason)  # 30 / 20.2 - 1
        # 10% apart is beyond that noise: the fastest is taken although it changes two variables.
        base, _, _ = self.choose(sweep_records({"inter.cross1.rails-both": 30.0, "inter.cross1.rail-mlx5_0": 22.0,
                                                "inter.cross0.rail-mlx5_0": 20.0, "inter.cross0.rails-both": 30.0}),
                                 sweep=sweep)
        self.assertEqual(base, "inter.cross0.rail-mlx5_0")

    def test_a_difference_within_noise_keeps_the_production_binding(self):
        base, env, reason = self.choose(sweep_records({"inter.cross1.rails-both": 20.2, "inter.cross1.rail-mlx5_0": 20.0,
                                                       "inter.cross0.rails-both": 20.1}))
        self.assertEqual((base, env), ("inter.cross1.rails-both", BOTH))
        self.assertIn("beyond noise at only 0 of 3", reason)
        # One repeat a side: a 10% difference lies inside the one-repeat floor (20% below 20 us): production kept.
        base, _, _ = self.choose(sweep_records({"inter.cross1.rails-both": 11.0, "inter.cross1.rail-mlx5_0": 10.0,
                                                "inter.cross0.rails-both": 12.0}, repeats=1))
        self.assertEqual(base, "inter.cross1.rails-both")

    def test_production_that_is_the_fastest_and_no_records(self):
        base, env, reason = self.choose(sweep_records({"inter.cross1.rails-both": 10.0, "inter.cross1.rail-mlx5_0": 20.0,
                                                       "inter.cross0.rails-both": 25.0}))
        self.assertEqual((base, env, reason[:45]), ("inter.cross1.rails-both", BOTH,
                                                    "the production binding is the sweep's fastest"))
        base, env, reason = self.choose([])
        self.assertEqual((base, env), ("inter.cross1.rails-both", BOTH))
        self.assertIn("no records at these sizes", reason)

    def test_production_not_swept_takes_the_fastest(self):
        base, env, reason = self.choose(sweep_records({"inter.cross1.rail-mlx5_0": 21.0, "inter.cross0.rails-both": 20.0}),
                                        production={"NCCL_CROSS_NIC": "2"})
        self.assertEqual((base, env), ("inter.cross0.rails-both", CROSS0))
        self.assertIn("the production binding was not measured", reason)


class BindingUnderSrun(TempDirTest):
    """Inside a Slurm allocation the variables ride in front of srun (`env NAME=VALUE srun ...`): the chosen
    binding rebuilds that prefix, and the coll_perf arguments after it stay as planned."""

    def test_the_chosen_binding_rebuilds_the_srun_prefix(self):
        from cclbench_lib.execute.runner import Baseline
        fake = os.path.join(self.tmp, "bin")
        os.makedirs(fake)
        with open(os.path.join(fake, "srun"), "w") as handle:
            handle.write('#!/bin/sh\n[ "$1" = "--mpi=list" ] && printf "MPI plugin types are...\\n\\tpmix\\n" && exit 0\n'
                         "exit 1\n")
        os.chmod(os.path.join(fake, "srun"), 0o755)
        plan_json = os.path.join(self.tmp, "plan.json")
        result = run_cli(["plan", "--gpus-per-node", "8", "--hcas", "mlx5_0:1,mlx5_3:1", "--decode",
                          "hidden=7168,batches=1,64", "--ab", "NCCL_PROTO=LL", "--results", self.results,
                          "--run-id", "S", "--json", plan_json],
                         env={"PATH": fake + ":/usr/bin:/bin", "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "node[5,7]"})
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(plan_json) as handle:
            document = json.load(handle)
        launches = {launch["name"]: launch for launch in document["launches"]}
        planned = launches["decode.all_reduce.inter.best.ab.PROTO-LL.rep1"]
        self.assertEqual(planned["argv"][:3], ["env", "NCCL_CROSS_NIC=1", "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1"])
        tail = planned["argv"][planned["argv"].index("srun"):]
        baseline = Baseline(document["plan_inputs"], os.path.join(self.tmp, "S"), False,
                            launches=list(launches.values()))
        baseline.manifest = {"plan": []}
        baseline.binding_choices["decode.all_reduce.inter.best"] = {"from": "inter.cross0.rail-mlx5_3", "reason": "r",
                                                                    "env": {"NCCL_CROSS_NIC": "0", "NCCL_IB_HCA": "=mlx5_3:1"}}
        baseline.apply_binding(planned)
        # The variant's own NCCL_PROTO stays; the binding's variables replace the production ones.
        self.assertEqual(planned["argv"][:5], ["env", "NCCL_CROSS_NIC=0", "NCCL_IB_HCA==mlx5_3:1", "NCCL_PROTO=LL", "srun"])
        self.assertEqual(planned["argv"][4:], tail)
        self.assertEqual(planned["env"], {"NCCL_CROSS_NIC": "0", "NCCL_IB_HCA": "=mlx5_3:1", "NCCL_PROTO": "LL"})
        self.assertEqual(planned["binding"]["chosen"]["from"], "inter.cross0.rail-mlx5_3")


class FakeTwoNodeBindingRun(TempDirTest):
    """The whole path with the doubles: rail mlx5_0 alone is 2x faster in the sweep, so the decode point over the
    rails runs with it (its probe and every repeat), and a resumed run keeps that choice."""

    def test_decode_over_the_rails_runs_with_the_sweeps_fastest_binding_and_resume_keeps_it(self):
        args = ["baseline", "--hosts", "localhost,127.0.0.1", "--gpus-per-node", "8", "--hcas", "mlx5_0:1,mlx5_3:1",
                "-b", "8K", "-e", "1M", "-f", "8", "-n", "3", "-w", "1", "--repeat", "2", "--cross-nic", "1",
                "--decode", "hidden=7168,batches=1,64"] + self.fake_args("B")
        result = run_cli(args, env={"FAKE_COLL_FAST_ENV": "NCCL_IB_HCA==mlx5_0:1:0.5", "CCLBENCH_NO_MATPLOTLIB": "1",
                                    "FAKE_COLL_FAIL_POINT": "decode.all_reduce.inter.best.rep2"})
        self.assertNotEqual(result.returncode, 0, "the failed repeat fails the run")
        run = os.path.join(self.results, "B")

        def decode_launches():
            with open(os.path.join(run, "run_manifest.json")) as handle:
                manifest = json.load(handle)
            ok, errors = validate("run_manifest.schema.json", os.path.join(run, "run_manifest.json"))
            self.assertTrue(ok, errors)
            return manifest, {launch["name"]: launch for launch in manifest["plan"]
                              if "decode.all_reduce.inter.best" in launch["name"]}

        manifest, launches = decode_launches()
        self.assertEqual(sorted(launches), ["decode.all_reduce.inter.best.rep1", "decode.all_reduce.inter.best.rep2",
                                            "tuning.decode.all_reduce.inter.best"])
        for launch in launches.values():
            self.assertEqual(launch["binding"]["chosen"]["from"], "inter.rail-mlx5_0", launch["name"])
            self.assertEqual(launch["env"], RAIL0_ALONE)
            exported = [launch["argv"][i + 1] for i, w in enumerate(launch["argv"]) if w == "-x"]
            self.assertEqual(sorted(exported), ["NCCL_IB_HCA==mlx5_0:1"])
        self.assertEqual(manifest["points"]["decode.all_reduce.inter.best.rep1"]["status"], "complete")
        self.assertEqual(manifest["points"]["decode.all_reduce.inter.best.rep2"]["status"], "failed")
        # Resumed: the repeat left runs with the binding chosen before (from the manifest, not chosen again).
        resumed = run_cli(["baseline", "--resume", "B", "--results", self.results],
                          env={"FAKE_COLL_FAST_ENV": "NCCL_IB_HCA==mlx5_0:1:0.5", "CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(resumed.returncode, 1, resumed.stderr)
        # This machine's doctor (NCCL_IB_HCA), and mlx5_3 alone at twice mlx5_0 alone's time: a slow rail.
        self.assertEqual(verdict_fail_codes(run), ["doctor.fail", "rail.slow"])
        manifest, launches = decode_launches()
        self.assertEqual(manifest["points"]["decode.all_reduce.inter.best.rep2"]["status"], "complete")
        self.assertEqual(launches["decode.all_reduce.inter.best.rep2"]["env"], RAIL0_ALONE)
        log = read_text(os.path.join(run, "run.log"))
        rep2 = [line for line in log.splitlines() if line.startswith("$ ") and "inter.best.rep2" in line]
        self.assertEqual(len(rep2), 2)
        self.assertTrue(all("NCCL_IB_HCA==mlx5_0:1 " in line for line in rep2), rep2)
        chosen = [line for line in log.splitlines() if line.startswith("# decode.all_reduce.inter.best: binding ")]
        self.assertEqual(chosen, ["# decode.all_reduce.inter.best: binding inter.rail-mlx5_0: the sweep's "
                                  "fastest (8K-512K, 3 binding(s)): the production binding is 100% slower, beyond noise "
                                  "at 3 of 3 size(s)"])
        text = read_text(os.path.join(run, "report.md"))
        self.assertIn("_Binding: inter.rail-mlx5_0 (NCCL_IB_HCA==mlx5_0:1), chosen at run time: "
                      "the sweep's fastest (8K-512K, 3 binding(s)): the production binding is 100% slower", text)
        self.assertIn("this point's binding, inter.rail-mlx5_0 (NCCL_IB_HCA==mlx5_0:1), is the "
                      "sweep's fastest; the production binding, inter.cross1.rails-both, is 100% slower there", text)


APPS = os.path.join(BINARY_DIR, "bench", "apps")
MISSING = [tool for tool in ("coll_perf", "topo_map") if not os.access(os.path.join(APPS, tool), os.X_OK)]
if not shutil.which("mpirun"):
    MISSING.append("mpirun")


@unittest.skipIf(MISSING, f"not built or not installed: {', '.join(MISSING)}")
class RealDecodeRun(TempDirTest):
    def test_decode_baseline_end_to_end_on_the_mpi_backend(self):
        """The real coll_perf under the real mpirun, no GPU visible: the decode points' records carry exactly
        the hand-computed sizes and are checked correct; the report has the decode table."""
        result = run_cli(["baseline", "-b", "8K", "-e", "8K", "-n", "2", "-w", "1", "--repeat", "1", "--timeout", "60",
                          "--launch-timeout", "240", "--decode", "hidden=7168,batches=1,64,collectives=all_reduce,alltoall,"
                          "topk=8,per_step=122", "--ab", "NCCL_PROTO=LL", "--bin-dir", APPS, "--results", self.results,
                          "--run-id", "D"], timeout=600)
        run = os.path.join(self.results, "D")
        self.assertEqual(result.returncode, 0, result.stderr)
        records = [r for r in read_jsonl(os.path.join(run, "cases.jsonl")) if r["point"].startswith("decode.")]
        sizes = {(r["collective"], r["requested_bytes"]) for r in records}
        self.assertEqual(sizes, {("all_reduce", 14336), ("all_reduce", 917504), ("alltoall", 114688),
                                 ("alltoall", 7340032)})
        self.assertTrue(all(r["status"] == "ok" and r["wrong"] == 0 and r["backend"] == "mpi" for r in records))
        self.assertFalse([r for r in read_jsonl(os.path.join(run, "cases.jsonl")) if ".ab." in r["point"]])
        text = read_text(os.path.join(run, "report.md"))
        self.assertIn("## Decode communication", text)
        self.assertIn("| 64 | 7340032 |", text)
        ok, errors = validate("run_manifest.schema.json", os.path.join(run, "run_manifest.json"))
        self.assertTrue(ok, errors)


def load_tests(loader, tests, pattern):
    """CTest runs this module as two tests: scripts_decode, every class on the test doubles (with
    CCLBENCH_DECODE_WITHOUT_REAL=1 set, RealDecodeRun is left out here), and scripts_decode_real, RealDecodeRun
    alone (the real coll_perf under mpirun, which the sanitizer stage runs again). A new class lands in the first."""
    if os.environ.get("CCLBENCH_DECODE_WITHOUT_REAL") != "1":
        return tests
    kept = unittest.TestSuite()
    for suite in tests:
        kept.addTests(test for test in suite if not isinstance(test, RealDecodeRun))
    return kept


if __name__ == "__main__":
    unittest.main()
