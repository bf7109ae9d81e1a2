#!/usr/bin/env python3
"""The bad-input table: every tool refuses bad input the same way (label unit).

For each row the tool must exit with a non-zero status that is not a signal (and not 128+signal),
print exactly one plain line on stderr (no stack trace, no Python traceback, no sanitizer report),
and leave no output file behind: every output the row names points into out/, which must be empty
afterwards. Tools whose GPU path is absent here must still refuse bad input before needing a GPU,
so rows for p2p_matrix run on this GPU-less machine too.

Usage: bad_input_table.py --source-dir S --bin-dir B --work-dir W [--python P]
"""

import os
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rel_common as rc  # noqa: E402

# 128+N for the signals a crash or an abort() would produce.
SIGNAL_STATUSES = {128 + n for n in (4, 6, 7, 8, 9, 11, 15)}


def make_inputs(work):
    """Bad files the rows point at."""
    inputs = rc.fresh_dir(os.path.join(work, "inputs"))

    def write(name, data):
        path = os.path.join(inputs, name)
        with open(path, "wb") as handle:
            handle.write(data)
        return path

    files = {
        "empty": write("empty.xml", b""),
        "binary": write("binary.xml", bytes(range(256)) * 4),
        "truncated_xml": write("truncated.xml", b'<?xml version="1.0"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
                                                b'<topology version="2.0">\n <object type="Machine" os_index="0"'),
        "not_hwloc": write("svg.xml", b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><rect/></svg>\n'),
        "future_hwloc": write("future.xml", b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
                                             b'<topology version="9.0">\n  <object type="Machine" os_index="0" '
                                             b'cpuset="0x1" complete_cpuset="0x1" allowed_cpuset="0x1" nodeset="0x1" '
                                             b'complete_nodeset="0x1" allowed_nodeset="0x1" gp_index="1"/>\n</topology>\n'),
        "billion_laughs": write("laughs.xml", b'<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
                                               b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
                                               b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>\n'
                                               b'<topology version="2.0">&lol3;</topology>\n'),
        "text_log": write("not_nccl.log", b"this is a build log\nmake: *** [all] Error 2\n"),
        "binary_log": write("binary.log", bytes(range(256)) * 16),
        "empty_log": write("empty.log", b""),
        "hostfile_bad_slots": write("hosts_slots", b"node5 slots=eight\n"),
        "hostfile_shell": write("hosts_shell", b"node5;reboot slots=8\n"),
        "garbage_jsonl": write("garbage.jsonl", b"{\"case_id\": \"x\", \"status\": \n\x00\x01\x02 not json\n"),
    }
    # A results "run directory" whose records are garbage, and one whose manifest is not JSON.
    for name, manifest, cases in (("run_garbage", b"{}", b"\x00\x01 not json at all\n"),
                                  ("run_badmanifest", b"{ this is not json", b"")):
        run = os.path.join(inputs, name)
        os.makedirs(run)
        with open(os.path.join(run, "run_manifest.json"), "wb") as handle:
            handle.write(manifest)
        with open(os.path.join(run, "cases.jsonl"), "wb") as handle:
            handle.write(cases)
        files[name] = run
    files["dir"] = inputs
    files["empty_dir"] = os.path.join(inputs, "no_logs_here")
    os.makedirs(files["empty_dir"])
    fifo = os.path.join(work, "fifo")
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    files["fifo"] = fifo
    link = os.path.join(work, "out_link")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.join(work, "elsewhere.json"), link)
    files["symlink"] = link
    return files


def reset_traps(files):
    """The FIFO and the dangling link rows aim at, as they were before any row ran."""
    for path in (files["fifo"], os.path.join(os.path.dirname(files["fifo"]), "elsewhere.json")):
        if os.path.lexists(path):
            os.unlink(path)
    os.mkfifo(files["fifo"])


def rows(args, files, out):
    """(tool, argv, extra env) for every bad input. Outputs go to `out` only."""
    bins = args.bin_dir
    coll = [os.path.join(bins, "coll_perf"), "--backend", "mpi", "-n", "1", "-w", "0"]
    p2p = [os.path.join(bins, "p2p_matrix")]
    topo = [os.path.join(bins, "topo_map")]
    evidence = [os.path.join(bins, "nccl_evidence")]
    cli = [args.python, os.path.join(args.source_dir, "scripts", "cclbench")]
    sample_xml = os.path.join(args.source_dir, "tests", "data", "topology")
    xml = None
    for root, _dirs, names in os.walk(sample_xml):
        for name in sorted(names):
            if name.endswith(".xml"):
                xml = os.path.join(root, name)
                break
        if xml:
            break
    j = os.path.join(out, "r.json")
    bad_logs = os.path.join(args.source_dir, "tests", "data", "evidence", "bad")
    regressions = os.path.join(args.source_dir, "tests", "fuzz", "regressions")
    table = [
        # coll_perf: flags, sizes, numbers, env, output paths (singleton MPI, no mpirun needed)
        ("coll_perf", coll + ["-b", "lots", "-J", j], {}),
        ("coll_perf", coll + ["-b", "64M", "-e", "8K", "-J", j], {}),
        ("coll_perf", coll + ["-b", "-8K", "-J", j], {}),
        ("coll_perf", coll + ["-e", "99999999999999999999999", "-J", j], {}),
        ("coll_perf", coll + ["-e", "16E", "-J", j], {}),
        ("coll_perf", coll + ["-f", "1", "-J", j], {}),
        ("coll_perf", coll + ["-n", "0", "-J", j], {}),
        ("coll_perf", coll + ["-n", "1e3x", "-J", j], {}),
        ("coll_perf", coll + ["-T", "-1", "-J", j], {}),
        ("coll_perf", coll + ["-d", "float17", "-J", j], {}),
        ("coll_perf", coll + ["-o", "xor", "-J", j], {}),
        ("coll_perf", coll + ["--coll", "all_party", "-J", j], {}),
        ("coll_perf", coll + ["--backend", "abacus", "-J", j], {}),
        ("coll_perf", coll + ["--frobnicate", "-J", j], {}),
        ("coll_perf", coll + ["-J", j, "-n"], {}),
        ("coll_perf", coll + ["-J", os.path.join(out, "missing", "r.json")], {}),
        ("coll_perf", coll + ["-J", out], {}),
        ("coll_perf", coll + ["-J", files["symlink"]], {}),
        ("coll_perf", coll + ["-J", files["fifo"]], {}),
        ("coll_perf", coll + ["--jsonl", files["fifo"], "-J", j], {}),
        ("coll_perf", coll + ["-J", j], {"CCLBENCH_TEST_STALL": "one:two"}),
        ("coll_perf", coll + ["-J", j, "--expect-transport", "carrier-pigeon"], {}),
        # p2p_matrix: its GPU path is absent here; bad input must be refused before a GPU is needed
        ("p2p_matrix", p2p + ["-b", "lots", "--json", j], {}),
        ("p2p_matrix", p2p + ["-b", "64M", "-e", "8K", "--json", j], {}),
        ("p2p_matrix", p2p + ["-f", "1", "--json", j], {}),
        ("p2p_matrix", p2p + ["-n", "0", "--json", j], {}),
        ("p2p_matrix", p2p + ["-t", "no_such_test", "--json", j], {}),
        ("p2p_matrix", p2p + ["--pair", "zero-one", "--json", j], {}),
        ("p2p_matrix", p2p + ["--blocker-timeout", "nan", "--json", j], {}),
        ("p2p_matrix", p2p + ["--json", out], {}),
        ("p2p_matrix", p2p + ["--json", files["symlink"]], {}),
        ("p2p_matrix", p2p + ["--frobnicate"], {}),
        # topo_map: XML files, NCCL_IB_HCA (flag and environment), bus ids, outputs
        ("topo_map", topo + ["--xml", os.path.join(out, "nothere.xml"), "--json", j], {}),
        ("topo_map", topo + ["--xml", files["empty"], "--json", j], {}),
        ("topo_map", topo + ["--xml", files["binary"], "--json", j], {}),
        ("topo_map", topo + ["--xml", files["truncated_xml"], "--json", j], {}),
        ("topo_map", topo + ["--xml", files["not_hwloc"], "--json", j], {}),
        ("topo_map", topo + ["--xml", files["future_hwloc"], "--json", j], {}),
        ("topo_map", topo + ["--xml", files["billion_laughs"], "--json", j], {}),
        ("topo_map", topo + ["--xml", files["dir"], "--json", j], {}),
        # fuzz findings: hwloc 2.9 crashed (SIGSEGV) / allocated 512 MiB on these one-byte corruptions
        ("topo_map", topo + ["--xml", os.path.join(regressions, "topology_xml_hwloc_segv.xml"), "--json", j], {}),
        ("topo_map", topo + ["--xml", os.path.join(regressions, "topology_xml_pu_without_os_index.xml"), "--json", j], {}),
        ("topo_map", topo + ["--xml", os.path.join(regressions, "topology_xml_hwloc_abort.xml"), "--json", j], {}),
        ("topo_map", topo + ["--hca", "^", "--json", j] + (["--xml", xml] if xml else []), {}),
        ("topo_map", topo + ["--hca", "mlx5_0:one", "--json", j] + (["--xml", xml] if xml else []), {}),
        ("topo_map", topo + ["--hca", "mlx5_0:0", "--json", j] + (["--xml", xml] if xml else []), {}),
        ("topo_map", topo + ["--json", j] + (["--xml", xml] if xml else []), {"NCCL_IB_HCA": "=mlx5_0:1, mlx5_3:1"}),
        ("topo_map", topo + ["--json", j] + (["--xml", xml] if xml else []), {"NCCL_IB_HCA": "x" * 100}),
        ("topo_map", topo + ["--gpu-bus-ids", "not-a-bus-id", "--json", j], {}),
        ("topo_map", topo + ["--json", out] + (["--xml", xml] if xml else []), {}),
        ("topo_map", topo + ["--json", files["fifo"]] + (["--xml", xml] if xml else []), {}),
        ("topo_map", topo + ["--sysfs-root"], {}),
        # nccl_evidence: logs, expectations, outputs
        # nccl_evidence: usage errors refuse before reading; unusable logs (empty, binary, not NCCL,
        # a device) are not usage errors by design: they are recorded, and the --expect gate then
        # fails for lack of evidence (exit 3, one line on stderr; the report itself is stdout).
        ("nccl_evidence", evidence + ["--json", j], {}),
        ("nccl_evidence", evidence + [os.path.join(out, "missing.log"), "--json", j], {}),
        ("nccl_evidence", evidence + [files["empty_dir"], "--json", j], {}),
        ("nccl_evidence", evidence + ["--expect", "inter=CARRIER_PIGEON", files["text_log"], "--json", j], {}),
        ("nccl_evidence", evidence + ["--expect", "inter=NET/IB", "--expect", "intra=P2P", files["text_log"], "--json", j], {}),
        ("nccl_evidence", evidence + ["--json", "-", files["text_log"]], {}),
        ("nccl_evidence", evidence + ["--json", out, files["text_log"]], {}),
        ("nccl_evidence", evidence + ["--json", files["symlink"], files["text_log"]], {}),
        ("nccl_evidence", evidence + ["--bogus", files["text_log"]], {}),
        ("nccl_evidence", evidence + ["--expect", "inter=NET/IB+GDRDMA", files["empty_log"]], {}),
        ("nccl_evidence", evidence + ["--expect", "inter=NET/IB+GDRDMA", files["binary_log"]], {}),
        ("nccl_evidence", evidence + ["--expect", "inter=NET/IB+GDRDMA", files["text_log"]], {}),
        ("nccl_evidence", evidence + ["--expect", "inter=NET/IB+GDRDMA", "/dev/zero"], {}),
        ("nccl_evidence", evidence + ["--expect", "inter=NET/IB+GDRDMA", os.path.join(bad_logs, "truncated.log")], {}),
        # scripts/cclbench: run ids, hostfiles, sizes, HCAs, result files
        ("cclbench", cli + ["plan", "--run-id", "../etc", "--results", out], {}),
        ("cclbench", cli + ["baseline", "--run-id", ".hidden", "--results", out], {}),
        ("cclbench", cli + ["baseline", "--run-id", "a\nb", "--results", out], {}),
        ("cclbench", cli + ["plan", "--hostfile", files["hostfile_bad_slots"], "--results", out], {}),
        ("cclbench", cli + ["plan", "--hostfile", files["hostfile_shell"], "--results", out], {}),
        ("cclbench", cli + ["plan", "--hosts", "node5,node7", "--gpus-per-node", "8", "--hcas", "mlx5_0", "--results", out], {}),
        ("cclbench", cli + ["plan", "-b", "64M", "-e", "8K", "--results", out], {}),
        ("cclbench", cli + ["plan", "-b", "lots", "--results", out], {}),
        ("cclbench", cli + ["plan", "--cross-nic", "7", "--results", out], {}),
        ("cclbench", cli + ["baseline", "--resume", "nothere", "--results", out], {}),
        ("cclbench", cli + ["compare", files["run_garbage"], files["run_garbage"]], {}),
        ("cclbench", cli + ["compare", files["garbage_jsonl"], files["garbage_jsonl"]], {}),
        ("cclbench", cli + ["report", files["run_badmanifest"]], {}),
        ("cclbench", cli + ["compare", files["run_garbage"], files["run_garbage"], "--fail-above", "lots"], {}),
        # smoke references (issue 37): refused before anything is measured or written
        ("cclbench", cli + ["smoke", "--against", files["garbage_jsonl"], "--results", out], {}),
        ("cclbench", cli + ["smoke", "--against", files["binary"], "--results", out], {}),
        ("cclbench", cli + ["compare", files["binary"], files["binary"]], {}),
    ]
    return table


def one_row(args, tool, argv, extra_env, out):
    env = rc.base_env(**extra_env)
    env.setdefault("CCLBENCH_FAKE_GPU_COUNT", "0")
    if "NCCL_IB_HCA" not in extra_env:
        env.pop("NCCL_IB_HCA", None)
    try:
        result = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                timeout=120, cwd=out)
    except subprocess.TimeoutExpired:
        return "did not exit within 120 s"
    err = result.stderr.decode(errors="replace")
    problems = []
    if result.returncode == 0:
        problems.append("exit 0")
    elif result.returncode < 0:
        problems.append(f"killed by signal {-result.returncode}")
    elif result.returncode in SIGNAL_STATUSES:
        problems.append(f"exit {result.returncode} (a signal's status)")
    lines = [line for line in err.splitlines() if line.strip()]
    if len(lines) != 1:
        problems.append(f"{len(lines)} stderr lines, expected one")
    signs = rc.crash_signs(err + result.stdout.decode(errors="replace"))
    if signs:
        problems.append(", ".join(signs))
    left = sorted(os.listdir(out))
    if left:
        problems.append(f"left behind in the output folder: {left}")
    if os.path.exists(os.path.join(os.path.dirname(out), "elsewhere.json")):
        problems.append("wrote through a symbolic link")
    fifo = os.path.join(os.path.dirname(out), "fifo")
    if not stat.S_ISFIFO(os.lstat(fifo).st_mode):
        problems.append("replaced the FIFO with a file")
    if problems:
        return f"{'; '.join(problems)}\n      exit {result.returncode}; stderr: {err.strip()[-800:]!r}"
    return None, result.returncode, lines[0] if lines else ""


def main():
    def options(parser):
        parser.add_argument("--verbose", action="store_true")
        parser.add_argument("--optional", action="append", default=[],
                            help="a tool this build does not have (p2p_matrix without CUDA): its rows are left out")
    args = rc.parse_args(options)
    work = rc.fresh_dir(args.work_dir)
    files = make_inputs(work)
    out = os.path.join(work, "out")
    missing = [tool for tool in ("coll_perf", "p2p_matrix", "topo_map", "nccl_evidence")
               if not os.access(os.path.join(args.bin_dir, tool), os.X_OK)]
    table = [row for row in rows(args, files, out) if row[0] not in missing]
    if missing:
        print(f"note: not built, their rows are left out: {', '.join(missing)}")
    failures = 0
    per_tool = {}
    for number, (tool, argv, extra_env) in enumerate(table, 1):
        rc.fresh_dir(out)
        reset_traps(files)
        outcome = one_row(args, tool, argv, extra_env, out)
        per_tool[tool] = per_tool.get(tool, 0) + 1
        shown = " ".join(a if len(a) < 60 else a[:57] + "..." for a in argv[1:] if not a.startswith(args.source_dir))
        env_shown = " ".join(f"{k}={v[:20]!r}" for k, v in extra_env.items())
        if isinstance(outcome, str):
            failures += 1
            print(f"FAIL {number:2d} {tool} {env_shown} {shown}\n      {outcome}")
        elif args.verbose:
            print(f"ok   {number:2d} {tool} {env_shown} {shown}\n      exit {outcome[1]}: {outcome[2]}")
    counts = ", ".join(f"{tool} {count}" for tool, count in per_tool.items())
    print(f"{len(table) - failures}/{len(table)} bad inputs refused cleanly ({counts})")
    required_missing = [name for name in missing if name not in args.optional]
    if required_missing or len(table) < 40:
        print(f"FAIL: the table must cover all five tools with >= 40 rows (missing: {required_missing}, rows: {len(table)})")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
