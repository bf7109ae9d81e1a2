#!/usr/bin/env python3
"""Security: secrets in the environment never reach results; files stay inside the run directory,
are not world-writable, and symbolic links are never followed when writing (label mpi).

  baseline      scripts/cclbench baseline on the MPI backend (real coll_perf under mpirun, real
                topo_map) with secret-looking variables exported: no value appears in any file of
                the run directory, in stdout or in stderr; every file is 0644 and every folder 0755
                even under umask 000; nothing is created outside the run directory.
  tools         coll_perf -J/--jsonl/--csv/--log-dir under mpirun (-x of every secret), topo_map
                --json, nccl_evidence --json: the same checks on their outputs.
  symlinks      a run directory that is a symbolic link, and result files that are symbolic links
                (-J, --jsonl, --csv, topo_map --json, nccl_evidence --json, a run's manifest on
                --resume): refused with a plain error, and the link target is never written.
Usage: secrets_leak.py --source-dir S --bin-dir B --mpiexec M --work-dir W [--only NAME]
"""

import os
import re
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rel_common as rc  # noqa: E402

# Names that match each pattern the issue lists, plus a canary outside any allowlist, plus
# NCCL_/CCLBENCH_/OMPI_ prefixed ones (prefixes a recorder might allowlist wholesale).
SECRETS = {
    "HF_TOKEN": "hf_tok_9f1c2e7a55d04b3c",
    "GITHUB_TOKEN": "ghp_reliabilityCanary0001",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-K7MDENG-bPxRfiCYCANARY",
    "MY_SECRET_THING": "secret-thing-canary-4471",
    "OPENAI_API_KEY": "sk-canary-8d1f0a9b2c3e4f5a",
    "DB_PASSWORD": "pa55w0rd-canary-31337",
    "PASSWORD_FILE_CONTENT": "pwfile-canary-777",
    "ZZ_CCLBENCH_CANARY_UNLISTED": "unlisted-canary-b8e2c4d6",
    "NCCL_IB_SECRET_TOKEN": "nccl-prefixed-token-canary-6161",
    "CCLBENCH_API_KEY": "cclbench-prefixed-key-canary-5252",
    "OMPI_MCA_SECRET_PASSWORD": "ompi-prefixed-pass-canary-4343",
}


def secret_env(**extra):
    env = rc.base_env(CCLBENCH_FAKE_GPU_COUNT="0", **extra)
    env.update(SECRETS)
    return env


def leaks_in_bytes(data):
    found = []
    for name, value in SECRETS.items():
        if value.encode() in data:
            found.append(name)
    return found


def scan_tree(root):
    """{path: [secret names]} for every file under root whose bytes hold a secret value."""
    hits = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as handle:
                found = leaks_in_bytes(handle.read())
            if found:
                hits[os.path.relpath(path, root)] = found
    return hits


def bad_modes(root):
    bad = []
    for folder, dirs, names in os.walk(root):
        for name in dirs:
            mode = stat.S_IMODE(os.lstat(os.path.join(folder, name)).st_mode)
            if mode & 0o022:
                bad.append(f"{os.path.relpath(os.path.join(folder, name), root)}/ {oct(mode)}")
        for name in names:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                bad.append(f"{os.path.relpath(path, root)} is a symbolic link")
            elif stat.S_IMODE(info.st_mode) != 0o644 and not (stat.S_IMODE(info.st_mode) & 0o022 == 0 and
                                                              os.path.basename(path).endswith(".sh")):
                bad.append(f"{os.path.relpath(path, root)} {oct(stat.S_IMODE(info.st_mode))}")
    return bad


def umask_zero():
    os.umask(0)


def listing(root):
    found = set()
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            found.add(os.path.relpath(os.path.join(folder, name), root))
    return found


def baseline(args):
    work = rc.fresh_dir(os.path.join(args.work_dir, "baseline"))
    results = os.path.join(work, "results")
    cwd = os.path.join(work, "cwd")
    os.makedirs(cwd)
    cmd = [args.python, os.path.join(args.source_dir, "scripts", "cclbench"), "baseline", "--results", results,
           "--run-id", "SEC", "--bin-dir", args.bin_dir, "-b", "8K", "-e", "16K", "-n", "2", "-w", "1",
           "--timeout", "60", "--launch-timeout", "240", "--verbose"]
    result = subprocess.run(cmd, env=secret_env(), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=umask_zero, timeout=900)
    out, err = result.stdout, result.stderr
    rc.check(result.returncode == 0, f"baseline failed (exit {result.returncode}):\n{err.decode(errors='replace')[-3000:]}")
    run_dir = os.path.join(results, "SEC")
    rc.check(os.path.isdir(run_dir), "no run directory")
    hits = scan_tree(run_dir)
    rc.check(not hits, f"secret values found in the run directory: {hits}")
    rc.check(not leaks_in_bytes(out + err), f"secret values printed: {leaks_in_bytes(out + err)}")
    modes = bad_modes(run_dir)
    rc.check(not modes, f"files not 0644 / folders group- or world-writable under umask 000: {modes[:10]}")
    outside = listing(work) - {"results", "results/SEC", "cwd"} - {os.path.join("results", "SEC", p) for p in listing(run_dir)}
    rc.check(not outside, f"created outside the run directory: {sorted(outside)[:10]}")
    files = sum(len(names) for _f, _d, names in os.walk(run_dir))
    return f"{files} files scanned for {len(SECRETS)} secrets, none found; modes ok under umask 000"


def tools(args):
    work = rc.fresh_dir(os.path.join(args.work_dir, "tools"))
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir)
    env = secret_env()
    coll = rc.mpirun_cmd(args.mpiexec, 2, [os.path.join(args.bin_dir, "coll_perf"), "--backend", "mpi", "-b", "8K",
                                           "-e", "32K", "-n", "2", "-w", "1",
                                           "-J", os.path.join(out_dir, "r.json"), "--jsonl", os.path.join(out_dir, "r.jsonl"),
                                           "--csv", os.path.join(out_dir, "r.csv"), "--log-dir", os.path.join(out_dir, "logs")],
                         env_names=sorted(SECRETS))
    runs = [coll,
            [os.path.join(args.bin_dir, "topo_map"), "--xml",
             os.path.join(args.source_dir, "tests", "data", "topology", "rtxpro_2socket.xml"), "--json", os.path.join(out_dir, "t.json")],
            [os.path.join(args.bin_dir, "nccl_evidence"), os.path.join(args.source_dir, "tests", "data", "evidence", "logs",
                                                                       "ib_gdr_two_rails"), "--json", os.path.join(out_dir, "e.json")]]
    printed = b""
    for argv in runs:
        result = subprocess.run(argv, env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=umask_zero, timeout=600)
        name = os.path.basename(argv[0]) if "mpirun" not in argv[0] else "coll_perf"
        # nccl_evidence exits 3 when the gate has nothing to check against; its file is still written.
        rc.check(result.returncode in (0, 3), f"{name} exit {result.returncode}: {result.stderr.decode(errors='replace')[-2000:]}")
        printed += result.stdout + result.stderr
    hits = scan_tree(work)
    rc.check(not hits, f"secret values found in tool outputs: {hits}")
    rc.check(not leaks_in_bytes(printed), f"secret values printed: {leaks_in_bytes(printed)}")
    modes = bad_modes(out_dir)
    rc.check(not modes, f"outputs not 0644 under umask 000: {modes}")
    return f"{len(listing(out_dir))} outputs clean"


def symlinks(args):
    work = rc.fresh_dir(os.path.join(args.work_dir, "symlinks"))
    target_dir = os.path.join(work, "elsewhere")
    os.makedirs(target_dir)
    bait = os.path.join(target_dir, "bait.json")
    with open(bait, "w") as handle:
        handle.write("{}\n")
    results = os.path.join(work, "results")
    os.makedirs(results)
    cli = [args.python, os.path.join(args.source_dir, "scripts", "cclbench")]
    checks = []

    def refused(label, argv, env=None):
        result = subprocess.run(argv, env=env or secret_env(), cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                timeout=600)
        err = result.stderr.decode(errors="replace")
        rc.check(0 < result.returncode < 128, f"{label}: exit {result.returncode}, expected a refusal\n{err[-1500:]}")
        rc.check(not rc.crash_signs(err), f"{label}: crash signs\n{err[-1500:]}")
        rc.check(re.search(r"symbolic link|symlink", err, re.I), f"{label}: the message does not name the link: {err.strip()[-400:]!r}")
        with open(bait) as handle:
            rc.check(handle.read() == "{}\n", f"{label}: wrote through the link into {bait}")
        rc.check(sorted(os.listdir(target_dir)) == ["bait.json"], f"{label}: created {os.listdir(target_dir)} in the link target")
        checks.append(label)

    # A run directory that is a link.
    os.symlink(target_dir, os.path.join(results, "LINKED"))
    refused("baseline into a linked run directory",
            cli + ["baseline", "--results", results, "--run-id", "LINKED", "--bin-dir", args.bin_dir, "-b", "8K", "-e", "8K", "-n", "1"])
    refused("baseline --resume of a linked run directory",
            cli + ["baseline", "--results", results, "--resume", "LINKED", "--bin-dir", args.bin_dir])
    # (A --results root that is a link, e.g. results -> /scratch/results, is a normal setup and is
    # followed on purpose; the run directory below it is where links are refused.)
    # A real run directory whose manifest is a link, resumed.
    real = os.path.join(results, "REAL")
    os.makedirs(real)
    os.symlink(bait, os.path.join(real, "run_manifest.json"))
    refused("baseline --resume with a linked run_manifest.json",
            cli + ["baseline", "--results", results, "--resume", "REAL", "--bin-dir", args.bin_dir])
    # Result files that are links.
    link = os.path.join(work, "link.json")
    os.symlink(bait, link)
    coll = [os.path.join(args.bin_dir, "coll_perf"), "--backend", "mpi", "-b", "8K", "-e", "8K", "-n", "1"]
    refused("coll_perf -J link", coll + ["-J", link])
    refused("coll_perf --jsonl link", coll + ["--jsonl", link])
    refused("coll_perf --csv link", coll + ["--csv", link])
    refused("topo_map --json link", [os.path.join(args.bin_dir, "topo_map"), "--xml",
                                     os.path.join(args.source_dir, "tests", "data", "topology", "rtxpro_2socket.xml"),
                                     "--json", link])
    refused("nccl_evidence --json link", [os.path.join(args.bin_dir, "nccl_evidence"),
                                          os.path.join(args.source_dir, "tests", "data", "evidence", "logs", "single_rank"),
                                          "--json", link])
    return f"{len(checks)} link refusals"


def main():
    args = rc.parse_args(lambda p: p.add_argument("--only", default=None))
    cases = [("baseline", lambda: baseline(args)), ("tools", lambda: tools(args)), ("symlinks", lambda: symlinks(args))]
    if args.only:
        cases = [case for case in cases if re.fullmatch(args.only, case[0])]
    return rc.run_cases(cases)


if __name__ == "__main__":
    sys.exit(main())
