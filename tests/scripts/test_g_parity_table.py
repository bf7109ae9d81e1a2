"""bench/micro/g_parity_table.py on hand-made nccl-tests output, coll_perf CSV and micro CSV: the
medians and ratios below are worked out by hand from the inputs."""
import importlib.util
import os
import tempfile
import unittest

SOURCE_DIR = os.environ.get("CCLBENCH_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SPEC = importlib.util.spec_from_file_location("g_parity_table", os.path.join(SOURCE_DIR, "bench", "micro", "g_parity_table.py"))
g_parity_table = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(g_parity_table)

NCCL_TESTS = """#  Rank  0 Group  0 Pid  1234 on h200 device  0 [0000:19:00] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        8192          2048     float     sum      -1    {t8k}    0.65    0.65      0    12.40    0.66    0.66      0
       16384          4096     float     sum      -1    {t16k}    1.27    1.27      0    12.80    1.28    1.28      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.97
"""

HEADER = ("point,case_id,collective,backend,nranks,dtype,op,root,in_place,bytes,count,requested_bytes,iterations,warmup,"
          "time_us_mean,time_us_min,time_us_p50,time_us_p95,time_us_p99,time_us_max,time_us_cv_pct,batch_time_us,"
          "algbw_gbps,busbw_gbps,wrong,status,reason,emulated,gated_time_us,bandwidth_from,samples_from,graph_launches,"
          "ops_per_launch,registration,unalign_elements,cta_policy,cycle")


def row(collective, in_place, size, batch, gated, status="ok"):
    values = {name: "" for name in HEADER.split(",")}
    values.update(collective=collective, in_place=in_place, bytes=str(size), batch_time_us=batch, gated_time_us=gated,
                  status=status)
    return ",".join(values[name] for name in HEADER.split(","))


MICRO = """name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,error_occurred,error_message,batch_us,gpus,launch_us
"BM_LaunchPathNccl/0/2/0/iterations:25/manual_time",25,13000,40000,ns,,,"AllReduce g2 cudaMalloc",,,13.25,2,11.5
"BM_LaunchPathNccl/0/2/1/iterations:25/manual_time",25,12000,40000,ns,,,"AllReduce g2 ncclMemAlloc",,,12.5,2,10.75
"BM_LaunchPathNccl/1/2/0/iterations:25/manual_time",,,,,,,,true,"no CUDA device",,,
"""


class GParityTable(unittest.TestCase):
    def test_medians_and_ratios(self):
        with tempfile.TemporaryDirectory() as out:
            for rep, (t8k, t16k) in enumerate([("12.58", "12.90"), ("12.00", "14.00"), ("13.00", "13.10")], 1):
                with open(os.path.join(out, f"nccl_tests.all_reduce.{rep}.txt"), "w") as stream:
                    stream.write(NCCL_TESTS.format(t8k=t8k, t16k=t16k))
            for rep, batch in enumerate(["16.99", "17.50", "16.00"], 1):
                with open(os.path.join(out, f"coll_perf.default.{rep}.csv"), "w") as stream:
                    stream.write("\n".join([HEADER, row("all_reduce", "false", 8192, batch, "6.5"),
                                            row("all_reduce", "true", 8192, "99.0", "99.0"),
                                            row("all_reduce", "false", 16384, "0", "", status="skipped")]) + "\n")
            with open(os.path.join(out, "micro.csv"), "w") as stream:
                stream.write("cclbench_micro context line on stdout\n" + MICRO)
            lines = g_parity_table.table(out)
        line_8k = next(line for line in lines if line.startswith("all_reduce") and " 8192 " in line)
        # nccl-tests median of 12.58, 12.00, 13.00; coll_perf median of 16.99, 17.50, 16.00 (the in-place
        # 99.0 ignored); 16.99 / 12.58 = 1.3506; gated median 6.5; no nolog runs: "-".
        self.assertEqual(line_8k.split(), ["all_reduce", "8192", "12.58", "16.99", "1.35", "-", "-", "-", "-", "6.50"])
        line_16k = next(line for line in lines if line.startswith("all_reduce") and " 16384 " in line)
        self.assertEqual(line_16k.split(), ["all_reduce", "16384", "13.10", "-", "-", "-", "-", "-", "-", "-"])
        micro = [line.split() for line in lines if "g2" in line]
        self.assertEqual(micro, [["AllReduce", "g2", "cudaMalloc", "13.25", "11.50"],
                                 ["AllReduce", "g2", "ncclMemAlloc", "12.50", "10.75"]])

    def test_bad_directory_is_a_usage_error(self):
        self.assertEqual(g_parity_table.main(["g_parity_table.py", "/nonexistent/dir"]), 2)


if __name__ == "__main__":
    unittest.main()
