"""`cclbench doctor` on fixture trees of the target node (doctor_fixture.py): the healthy node passes,
each injected fault is caught by the right check with the right verdict and subject, bad input gives
skip/warn with a reason (never a crash), the CLI's exit codes and JSON, several hosts, and the
baseline's doctor point, doctor.json and report table."""
import json
import os
import shutil
import stat
import unittest

import doctor_fixture
from helpers import FAKE_BIN, FAKE_MPIRUN, TempDirTest, read_text, run_cli, validate

from cclbench_lib.execute import doctor
from cclbench_lib.model import doctor_checks

STATUSES = {"pass", "warn", "fail", "skip"}


class FixtureTest(TempDirTest):
    def node(self, env=None, probes=None, host="node7", **faults):
        root = os.path.join(self.tmp, "node")
        shutil.rmtree(root, ignore_errors=True)
        sysfs, procfs = doctor_fixture.build(root, **faults)
        self.sysfs, self.procfs = sysfs, procfs
        return doctor.run_host(sysfs, procfs, env or {}, probes or doctor.FixtureProbes(), host)

    def of(self, document, check_id):
        return [c for c in document["checks"] if c["id"] == check_id]

    def verdict(self, document, check_id, subject):
        found = [c for c in document["checks"] if c["id"] == check_id and c["subject"] == subject]
        self.assertEqual(len(found), 1, f"{check_id} {subject}: {json.dumps(document['checks'], indent=1)}")
        return found[0]

    def assertOnlyChange(self, document, check_id, subject, status):
        """The fault shows in exactly one result: (check_id, subject) has `status`, nothing else is
        warn/fail."""
        hit = self.verdict(document, check_id, subject)
        self.assertEqual(hit["status"], status, hit)
        others = [c for c in document["checks"] if c is not hit and c["status"] in ("warn", "fail")]
        self.assertEqual(others, [], "only the injected fault shows")
        return hit

    def assertWellFormed(self, document):
        for check in document["checks"]:
            self.assertIn(check["status"], STATUSES)
            self.assertTrue(check["detail"])
            if check["status"] == "skip":
                self.assertTrue(check["reason"], f"a skip without its reason: {check}")
            else:
                self.assertIsNone(check["reason"])


class HealthyNode(FixtureTest):
    def test_all_pass_or_skip_with_every_device_named(self):
        document = self.node()
        self.assertWellFormed(document)
        bad = [c for c in document["checks"] if c["status"] in ("warn", "fail")]
        self.assertEqual(bad, [])
        self.assertEqual(document["status"], "pass")
        links = {c["subject"] for c in self.of(document, "pcie_link") if c["status"] == "pass"}
        self.assertEqual(links, {"GPU0 0000:03:00.0", "GPU1 0000:04:00.0", "GPU2 0000:05:00.0", "GPU3 0000:06:00.0",
                                 "GPU4 0000:83:00.0", "GPU5 0000:84:00.0", "GPU6 0000:85:00.0", "GPU7 0000:86:00.0",
                                 "mlx5_0 0000:07:00.0", "mlx5_3 0000:87:00.0"})
        self.assertEqual({c["subject"] for c in self.of(document, "rdma_port")}, {"mlx5_0:1", "mlx5_3:1"})
        self.assertEqual({c["subject"] for c in self.of(document, "netdev_mtu")},
                         {"eth0 (mlx5_0:1)", "eth3 (mlx5_3:1)"})
        self.assertIn("index 3 (10.0.0.7 on eth0)", self.verdict(document, "roce_gid", "mlx5_0:1")["detail"])
        self.assertIn("GPU0, GPU1, GPU2, GPU3", self.verdict(document, "numa_affinity", "mlx5_0 0000:07:00.0")["detail"])
        self.assertIn("GPU4, GPU5, GPU6, GPU7", self.verdict(document, "numa_affinity", "mlx5_3 0000:87:00.0")["detail"])
        self.assertEqual(self.verdict(document, "acs_iommu", "switch 0000:01:00.0")["status"], "pass")
        self.assertEqual(self.verdict(document, "gdr_module", "nvidia_peermem")["status"], "pass")
        versions = document["versions"]["node7"]
        self.assertEqual(versions["nvidia_driver"], "580.95.05")
        self.assertEqual(versions["hca_fw"], {"mlx5_0": "28.43.1014", "mlx5_3": "28.43.1014"})
        skipped = {c["subject"]: c["reason"] for c in document["checks"] if c["status"] == "skip"}
        self.assertIn("fixture root", skipped["nvml"], "live-only parts skip for a fixture, saying so")

    def test_all_ten_checks_report(self):
        document = self.node()
        self.assertEqual({c["id"] for c in document["checks"]}, set(doctor_checks.CHECK_IDS))

    def test_the_builder_lays_sysfs_out_as_the_kernel_does(self):
        self.node()
        gpu = os.path.join(self.sysfs, "bus", "pci", "devices", "0000:05:00.0")
        self.assertTrue(os.path.islink(gpu))
        self.assertEqual(os.readlink(gpu),
                         "../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:02.0/0000:05:00.0")
        hca = os.path.join(self.sysfs, "class", "infiniband", "mlx5_3")
        self.assertEqual(os.path.basename(os.path.realpath(os.path.join(hca, "device"))), "0000:87:00.0")
        self.assertEqual(read_text(os.path.join(hca, "ports", "1", "gids", "3")).strip(),
                         "0000:0000:0000:0000:0000:ffff:0a00:0307")
        self.assertEqual(read_text(os.path.join(gpu, "class")).strip(), "0x030200")
        group = os.path.realpath(os.path.join(gpu, "iommu_group"))
        self.assertTrue(os.path.islink(os.path.join(group, "devices", "0000:05:00.0")))


class Faults(FixtureTest):
    """Each fault of the issue's table, injected alone."""

    def test_gpu_trained_at_x8(self):
        hit = self.assertOnlyChange(self.node(gpu_width={"0000:05:00.0": "8"}), "pcie_link", "GPU2 0000:05:00.0", "fail")
        self.assertIn("x8 of x16", hit["detail"])
        self.assertIn("16.0 GT/s PCIe x8", hit["detail"])

    def test_gpu_in_a_gen4_slot(self):
        hit = self.assertOnlyChange(self.node(upstream_port_speed={"0000:82:01.0": doctor_fixture.GEN4}),
                                    "pcie_link", "GPU5 0000:84:00.0", "fail")
        self.assertIn("0000:82:01.0 supports only 16 GT/s", hit["detail"])

    def test_nic_downtrained(self):
        hit = self.assertOnlyChange(self.node(nic_speed={"mlx5_3": doctor_fixture.GEN4}),
                                    "pcie_link", "mlx5_3 0000:87:00.0", "fail")
        self.assertIn("16 GT/s of 32 GT/s", hit["detail"])

    def test_idle_gpu_link_speed_is_not_a_fault(self):
        # GPUs drop to 2.5 GT/s when idle; the width stays. The slot allows Gen5, so this passes.
        root = os.path.join(self.tmp, "node")
        sysfs, procfs = doctor_fixture.build(root)
        with open(os.path.join(sysfs, "bus", "pci", "devices", "0000:83:00.0", "current_link_speed"), "w") as handle:
            handle.write("2.5 GT/s PCIe\n")
        document = doctor.run_host(sysfs, procfs, {}, doctor.FixtureProbes(), "node7")
        hit = self.verdict(document, "pcie_link", "GPU4 0000:83:00.0")
        self.assertEqual(hit["status"], "pass")
        self.assertIn("idle", hit["detail"])

    def test_no_gpudirect_module_with_the_proprietary_driver(self):
        hit = self.assertOnlyChange(self.node(peermem=False, open_module=False), "gdr_module", "host", "fail")
        self.assertIn("modprobe nvidia-peermem", hit["detail"])

    def test_dma_buf_replaces_peermem_with_the_open_module(self):
        document = self.node(peermem=False, open_module=True, kernel="6.8.0-85-generic")
        self.assertEqual(self.verdict(document, "gdr_module", "dma-buf")["status"], "pass")
        document = self.node(peermem=False, open_module=True, kernel="5.4.0-200-generic")
        self.assertEqual(self.verdict(document, "gdr_module", "host")["status"], "fail")

    def test_rail_down(self):
        hit = self.assertOnlyChange(self.node(port_state={"mlx5_3": ("1: DOWN", "3: Disabled")}),
                                    "rdma_port", "mlx5_3:1", "fail")
        self.assertIn("1: DOWN", hit["detail"])

    def test_rail_slower_than_its_peer(self):
        hit = self.assertOnlyChange(self.node(port_rate={"mlx5_0": "200 Gb/sec (2X NDR)"}),
                                    "rdma_port", "mlx5_0:1", "fail")
        self.assertIn("200 Gb/s, below its peers' 400 Gb/s", hit["detail"])

    def test_nccl_ib_hca_limits_the_ports_checked(self):
        document = self.node(env={"NCCL_IB_HCA": "=mlx5_0:1"}, port_state={"mlx5_3": ("1: DOWN", "3: Disabled")})
        self.assertEqual([c["subject"] for c in self.of(document, "rdma_port")], ["mlx5_0:1"])
        self.assertEqual(document["status"], "pass", "the down port is not one NCCL will use")

    def test_no_roce_v2_ipv4_gid(self):
        document = self.node(gids="ipv6_only")
        for subject in ("mlx5_0:1", "mlx5_3:1"):
            hit = self.verdict(document, "roce_gid", subject)
            self.assertEqual(hit["status"], "warn")
            self.assertIn("NCCL_IB_GID_INDEX=1", hit["detail"], "the IPv6 RoCE v2 entry is index 1")
        self.assertEqual([c for c in document["checks"] if c["status"] == "fail"], [])

    def test_wrong_gid_index_in_the_environment(self):
        document = self.node(env={"NCCL_IB_GID_INDEX": "0"})
        hit = self.verdict(document, "roce_gid", "mlx5_3:1")
        self.assertEqual(hit["status"], "warn")
        self.assertIn("use NCCL_IB_GID_INDEX=3", hit["detail"])

    def test_mtu_1500_on_a_roce_netdev(self):
        hit = self.assertOnlyChange(self.node(mtu={"eth3": 1500}), "netdev_mtu", "eth3 (mlx5_3:1)", "warn")
        self.assertIn("MTU 1500", hit["detail"])

    def test_rail_and_its_gpus_on_different_numa_nodes(self):
        hit = self.assertOnlyChange(self.node(nic_numa={"mlx5_3": 0}), "numa_affinity", "mlx5_3 0000:87:00.0", "warn")
        self.assertIn("NUMA 0", hit["detail"])
        self.assertIn("GPU4, GPU5, GPU6, GPU7", hit["detail"])

    def test_numa_node_unknown_on_two_sockets(self):
        self.assertOnlyChange(self.node(gpu_numa={"0000:85:00.0": -1}), "numa_affinity", "GPU6 0000:85:00.0", "fail")

    def test_iommu_translating(self):
        hit = self.assertOnlyChange(self.node(iommu_type="DMA-FQ", cmdline_pt=False), "acs_iommu", "iommu", "warn")
        self.assertIn("iommu=pt", hit["detail"])

    def test_acs_splits_one_switch_into_iommu_groups(self):
        document = self.node(split_iommu_groups=True)
        for switch in ("switch 0000:01:00.0", "switch 0000:81:00.0"):
            hit = self.verdict(document, "acs_iommu", switch)
            self.assertEqual(hit["status"], "warn")
            self.assertIn("5 IOMMU groups", hit["detail"])

    def test_acs_request_redirect_bit(self):
        hit = self.assertOnlyChange(self.node(acs_redirect={"0000:02:01.0"}), "acs_iommu", "switch 0000:01:00.0",
                                    "warn")
        self.assertIn("redirect is on at 0000:02:01.0", hit["detail"])

    def test_hca_firmware_differs_within_a_host(self):
        hit = self.assertOnlyChange(self.node(fw={"mlx5_3": "28.39.1002"}), "versions", "hca_fw", "warn")
        self.assertIn("mlx5_3 28.39.1002", hit["detail"])

    def test_versions_differ_across_hosts(self):
        a = self.node(host="node5", probes=doctor.FixtureProbes(versions={"nccl": "2.28.3", "open_mpi": "4.1.6"}))
        b = self.node(host="node7", probes=doctor.FixtureProbes(versions={"nccl": "2.27.7", "open_mpi": "4.1.6"}),
                      fw={"mlx5_0": "28.39.1002", "mlx5_3": "28.39.1002"})
        merged = doctor.merge({"node5": a, "node7": b}, ["node5", "node7"])
        nccl = self.verdict(merged, "versions", "nccl")
        self.assertEqual(nccl["status"], "fail")
        self.assertEqual(nccl["host"], "*")
        self.assertIn("node5 2.28.3, node7 2.27.7", nccl["detail"])
        self.assertEqual(self.verdict(merged, "versions", "open_mpi")["status"], "pass")
        self.assertEqual(self.verdict(merged, "versions", "mlx5_0 fw_ver")["status"], "fail")
        self.assertEqual(merged["status"], "fail")
        self.assertEqual(merged["summary"]["fail"], 3)

    def test_a_host_that_did_not_report(self):
        merged = doctor.merge({"node5": self.node(host="node5")}, ["node5", "node7"])
        self.assertEqual(self.verdict(merged, "host_report", "node7")["status"], "fail")
        self.assertIsNone(merged["versions"]["node7"])

    def test_nccl_env_mistakes(self):
        cases = [({"NCCL_IB_HCA": "=mlx5_0:1,mlx5_9:1"}, "NCCL_IB_HCA", "fail", "mlx5_9 does not exist"),
                 ({"NCCL_IB_HCA": "mlx5_0:2"}, "NCCL_IB_HCA", "fail", "mlx5_0 has no port 2"),
                 ({"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}, "NCCL_IB_HCA", "pass", "exists"),
                 ({"NCCL_IB_HCA": "mlx5"}, "NCCL_IB_HCA", "pass", "exists"),
                 ({"NCCL_SOCKET_IFNAME": "=eth9"}, "NCCL_SOCKET_IFNAME", "fail", "no interface matches eth9"),
                 ({"NCCL_SOCKET_IFNAME": "eth"}, "NCCL_SOCKET_IFNAME", "pass", "matches"),
                 ({"NCCL_SOCKET_IFNAME": "^docker"}, "NCCL_SOCKET_IFNAME", "pass", "matches"),
                 ({"NCCL_NET": "Socket"}, "NCCL_NET", "fail", "forces TCP sockets"),
                 ({"NCCL_NET": "IB"}, "NCCL_NET", "pass", "fits"),
                 ({"NCCL_IB_DISABLE": "1"}, "NCCL_IB_DISABLE", "fail", "forces TCP sockets"),
                 ({"NCCL_CROSS_NIC": "3"}, "NCCL_CROSS_NIC", "fail", "not 0, 1 or 2")]
        root = os.path.join(self.tmp, "node")
        sysfs, procfs = doctor_fixture.build(root)
        for env, subject, status, text in cases:
            with self.subTest(env=env):
                document = doctor.run_host(sysfs, procfs, env, doctor.FixtureProbes(), "node7")
                hit = self.verdict(document, "nccl_env", subject)
                self.assertEqual(hit["status"], status, hit)
                self.assertIn(text, hit["detail"])

    def test_nccl_net_ib_without_an_active_port(self):
        document = self.node(env={"NCCL_NET": "IB"}, port_state={"mlx5_0": ("1: DOWN", "2: Polling"),
                                                                 "mlx5_3": ("1: DOWN", "2: Polling")})
        self.assertEqual(self.verdict(document, "nccl_env", "NCCL_NET")["status"], "fail")

    def test_gpu_state_from_nvml_and_the_kernel_log(self):
        healthy = {"persistence_mode": 1, "ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0,
                   "retired_pages_pending": 0, "retired_pages_dbe": 0, "throttle_reasons": 0x1,
                   "remap_pending": 0, "remap_failure": 0}
        gpus = [dict(healthy, index=i, bus_id=f"00000000:{bus}") for i, bus in
                enumerate(["03:00.0", "04:00.0", "05:00.0", "06:00.0", "83:00.0", "84:00.0", "85:00.0", "86:00.0"])]
        gpus[3]["ecc_uncorrected_volatile"] = 2
        gpus[6]["throttle_reasons"] = 0x40 | 0x1
        gpus[7]["persistence_mode"] = 0
        kmsg = "\n".join(["6,100,5,-;NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05",
                          "3,200,9,-;NVRM: Xid (PCI:0000:84:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
                          "4,201,9,-;NVRM: Xid (PCI:0000:04:00): 13, pid=1234, name=python3, Graphics Exception"])
        probes = doctor.FixtureProbes(nvml={"gpus": gpus}, kmsg={"text": kmsg, "reason": None})
        document = self.node(probes=probes)
        states = {c["subject"]: c for c in self.of(document, "gpu_state")}
        self.assertEqual(states["GPU3 0000:06:00.0"]["status"], "fail")
        self.assertIn("2 uncorrectable ECC errors", states["GPU3 0000:06:00.0"]["detail"])
        self.assertEqual(states["GPU6 0000:85:00.0"]["status"], "warn")
        self.assertIn("hardware thermal slowdown", states["GPU6 0000:85:00.0"]["detail"])
        self.assertEqual(states["GPU7 0000:86:00.0"]["status"], "warn")
        self.assertIn("persistence mode off", states["GPU7 0000:86:00.0"]["detail"])
        self.assertEqual(states["GPU0 0000:03:00.0"]["status"], "pass")
        xids = [c for c in self.of(document, "gpu_state") if "Xid" in c["detail"]]
        self.assertEqual({(c["subject"], c["status"]) for c in xids},
                         {("GPU5 0000:84:00.0", "fail"), ("GPU1 0000:04:00.0", "warn")})

    def test_parse_xids(self):
        text = "NVRM: Xid (PCI:0000:84:00): 79, pid=1\nNVRM: Xid (PCI:00000000:03:00.0): 48, x\nno xid here"
        self.assertEqual(doctor_checks.parse_xids(text), [("0000:84:00", 79), ("0000:03:00", 48)])


class BadInput(FixtureTest):
    """Never a crash: a skip or warn that names the file and why."""

    def test_missing_roots(self):
        missing = os.path.join(self.tmp, "nothing")
        document = doctor.run_host(missing, missing + "-proc", {}, doctor.FixtureProbes(), "node7")
        self.assertWellFormed(document)
        self.assertNotIn("fail", {c["status"] for c in document["checks"]})
        link = self.of(document, "pcie_link")[0]
        self.assertEqual(link["status"], "skip")
        self.assertIn(f"sysfs root {missing} is not a directory", link["reason"])

    def test_garbage_in_sysfs_files(self):
        gpu = "bus/pci/devices/0000:04:00.0/"
        port = "class/infiniband/mlx5_0/ports/1/"
        document = self.node(garbage={gpu + "current_link_speed": "fast!", port + "state": "ACTIVE-ish",
                                      "class/net/eth3/mtu": "jumbo", "bus/pci/devices/0000:87:00.0/numa_node": "zero",
                                      port + "gids/3": "not-a-gid", "bus/pci/devices/0000:05:00.0/vendor": "nvidia"})
        self.assertWellFormed(document)
        self.assertEqual(self.verdict(document, "pcie_link", "GPU1 0000:04:00.0")["status"], "warn")
        self.assertIn("current_link_speed='fast!'", self.verdict(document, "pcie_link", "GPU1 0000:04:00.0")["detail"])
        self.assertEqual(self.verdict(document, "rdma_port", "mlx5_0:1")["status"], "warn")
        self.assertEqual(self.verdict(document, "netdev_mtu", "eth3 (mlx5_3:1)")["status"], "warn")
        self.assertEqual(self.verdict(document, "numa_affinity", "mlx5_3 0000:87:00.0")["status"], "warn")
        # GPU2's vendor is unreadable as a number: it is not recognised as an NVIDIA GPU, so seven GPUs remain.
        self.assertEqual(len([c for c in self.of(document, "pcie_link") if c["subject"].startswith("GPU")]), 7)

    def test_a_one_megabyte_file(self):
        document = self.node(huge={"bus/pci/devices/0000:06:00.0/max_link_width": 1 << 20,
                                   "class/net/eth0/mtu": 1 << 20})
        self.assertWellFormed(document)
        hit = self.verdict(document, "pcie_link", "GPU3 0000:06:00.0")
        self.assertEqual(hit["status"], "warn")
        self.assertIn("larger than 4096 bytes", hit["detail"])
        self.assertIn("larger than 4096 bytes", self.verdict(document, "netdev_mtu", "eth0 (mlx5_0:1)")["detail"])

    def test_a_directory_where_a_file_belongs(self):
        document = self.node(as_directory={"class/infiniband/mlx5_3/ports/1/rate": True})
        self.assertWellFormed(document)
        hit = self.verdict(document, "rdma_port", "mlx5_3:1")
        self.assertEqual(hit["status"], "warn")
        self.assertIn("is a directory", hit["detail"])

    def test_unreadable_file(self):
        if os.geteuid() == 0:
            self.skipTest("running as root: file permissions do not stop root from reading "
                          "(test_a_directory_where_a_file_belongs covers a read error)")
        document = self.node(unreadable={"class/net/eth0/mtu": True})
        hit = self.verdict(document, "netdev_mtu", "eth0 (mlx5_0:1)")
        self.assertEqual(hit["status"], "warn")
        self.assertIn("Permission denied", hit["detail"])

    def test_a_fifo_does_not_hang(self):
        root = os.path.join(self.tmp, "node")
        sysfs, procfs = doctor_fixture.build(root)
        mtu = os.path.realpath(os.path.join(sysfs, "class", "net", "eth0", "mtu"))
        os.unlink(mtu)
        os.mkfifo(mtu)
        document = doctor.run_host(sysfs, procfs, {}, doctor.FixtureProbes(), "node7")
        self.assertEqual(self.verdict(document, "netdev_mtu", "eth0 (mlx5_0:1)")["status"], "warn")

    def test_truncated_acs_capability_list(self):
        path = os.path.join(self.tmp, "config")
        with open(path, "wb") as handle:
            handle.write(bytes(0x100) + (0x000d | (0x100 << 20)).to_bytes(4, "little") + bytes(8))
        self.assertEqual(doctor_checks.acs_redirect_bits(path), (False, False))
        with open(path, "wb") as handle:  # a capability whose "next" points at itself (not ACS): a loop
            handle.write(bytes(0x100) + (0x0001 | (0x100 << 20)).to_bytes(4, "little") + bytes(4092 - 0x100))
        self.assertIsNone(doctor_checks.acs_redirect_bits(path))
        with open(path, "wb") as handle:
            handle.write(bytes(64))  # what a non-root reader sees
        self.assertIsNone(doctor_checks.acs_redirect_bits(path))


class Command(FixtureTest):
    def fixture(self, **faults):
        return doctor_fixture.build(os.path.join(self.tmp, "node"), **faults)

    def test_healthy_fixture_exit_0_and_json_validates(self):
        sysfs, procfs = self.fixture()
        out = os.path.join(self.tmp, "doctor.json")
        result = run_cli(["doctor", "--sysfs-root", sysfs, "--procfs-root", procfs, "--json", out, "--as-host", "node7"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("pcie_link      pass    GPU0 0000:03:00.0", result.stdout)
        self.assertRegex(result.stdout, r"doctor: pass \(\d+ pass, 0 warn, 0 fail, \d+ skip\) on node7")
        with open(out) as handle:
            document = json.load(handle)
        self.assertEqual(document["scope"], "cluster")
        self.assertEqual(document["hosts"], ["node7"])
        self.assertFalse(document["roots"]["live"])
        ok, errors = validate("doctor.schema.json", out)
        self.assertTrue(ok, errors)

    def test_link_rates_are_recorded_for_the_ceilings(self):
        """doctor.json 'links' (schema 1.1): what the baseline's ceilings come from, read from sysfs: each RDMA
        port's rate (the fixture's 400 Gb/sec), each netdev's speed in Mb/s (written here: 100000 and -1, the
        kernel's unknown), each GPU's PCIe max link (the fixture's Gen5 x16)."""
        sysfs, procfs = self.fixture()
        with open(os.path.join(sysfs, "class", "net", "eth0", "speed"), "w") as handle:
            handle.write("100000\n")
        with open(os.path.join(sysfs, "class", "net", "eth3", "speed"), "w") as handle:
            handle.write("-1\n")
        out = os.path.join(self.tmp, "doctor.json")
        result = run_cli(["doctor", "--sysfs-root", sysfs, "--procfs-root", procfs, "--json", out, "--as-host", "node7"])
        self.assertEqual(result.returncode, 0, result.stderr)
        ok, errors = validate("doctor.schema.json", out)
        self.assertTrue(ok, errors)
        with open(out) as handle:
            links = json.load(handle)["links"]["node7"]
        self.assertEqual({name: port["rate_gbps"] for name, port in links["rdma_ports"].items()},
                         {"mlx5_0:1": 400.0, "mlx5_3:1": 400.0})
        self.assertEqual(links["netdevs"]["eth0"], {"speed_mbps": 100000, "reason": None})
        self.assertIsNone(links["netdevs"]["eth3"]["speed_mbps"])
        self.assertIn("no known speed", links["netdevs"]["eth3"]["reason"])
        self.assertEqual(len(links["gpus"]), 8)
        self.assertEqual({(gpu["max_link_speed_gts"], gpu["max_link_width"]) for gpu in links["gpus"]}, {(32.0, 16)})

    def test_a_virtual_interface_has_no_line_rate(self):
        """A veth's speed (the kernel's nominal 10000 Mb/s) is no ceiling: the virtual cluster's veth pairs carried
        1.6 GB/s of bus bandwidth over a '10 Gb/s' link. An interface that resolves under sys/devices/virtual/net
        has a null speed and says why; a device-backed one keeps its speed."""
        sysfs, procfs = self.fixture()
        virtual = os.path.join(sysfs, "devices", "virtual", "net", "veth9")
        os.makedirs(virtual)
        with open(os.path.join(virtual, "speed"), "w") as handle:
            handle.write("10000\n")
        os.symlink(os.path.relpath(virtual, os.path.join(sysfs, "class", "net")), os.path.join(sysfs, "class", "net", "veth9"))
        with open(os.path.join(sysfs, "class", "net", "eth0", "speed"), "w") as handle:
            handle.write("100000\n")
        out = os.path.join(self.tmp, "doctor.json")
        result = run_cli(["doctor", "--sysfs-root", sysfs, "--procfs-root", procfs, "--json", out, "--as-host", "node7"])
        self.assertIn(result.returncode, (0, 1), result.stderr)
        with open(out) as handle:
            netdevs = json.load(handle)["links"]["node7"]["netdevs"]
        self.assertIsNone(netdevs["veth9"]["speed_mbps"])
        self.assertIn("virtual interface", netdevs["veth9"]["reason"])
        self.assertEqual(netdevs["eth0"], {"speed_mbps": 100000, "reason": None})

    def test_fault_fixture_exit_1_and_json_validates(self):
        sysfs, procfs = self.fixture(gpu_width={"0000:05:00.0": "8"}, mtu={"eth3": 1500})
        out = os.path.join(self.tmp, "doctor.json")
        result = run_cli(["doctor", "--sysfs-root", sysfs, "--procfs-root", procfs, "--json", out, "--as-host", "node7"])
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("pcie_link      fail    GPU2 0000:05:00.0", result.stdout)
        self.assertIn("netdev_mtu     warn    eth3 (mlx5_3:1)", result.stdout)
        ok, errors = validate("doctor.schema.json", out)
        self.assertTrue(ok, errors)

    def test_schema_rejects_a_skip_without_reason(self):
        sysfs, procfs = self.fixture()
        document = doctor.merge({"node7": doctor.run_host(sysfs, procfs, {}, doctor.FixtureProbes(), "node7")})
        skip = next(c for c in document["checks"] if c["status"] == "skip")
        skip["reason"] = None
        path = os.path.join(self.tmp, "bad.json")
        with open(path, "w") as handle:
            json.dump(document, handle)
        ok, _ = validate("doctor.schema.json", path)
        self.assertFalse(ok)

    def test_bad_usage_exit_2_one_line(self):
        for args, text in ((["--hosts", "a", "--hostfile", "b"], "either --hosts or --hostfile"),
                           (["--hosts", "a,,b"], "--hosts"),
                           (["--bogus"], "unrecognized arguments"),
                           (["--as-host", "no/slash"], "--as-host")):
            with self.subTest(args=args):
                self.assertOneLineError(run_cli(["doctor"] + args), 2, text)

    def test_missing_root_is_skips_not_a_crash(self):
        result = run_cli(["doctor", "--sysfs-root", os.path.join(self.tmp, "none"), "--procfs-root",
                          os.path.join(self.tmp, "none")])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("is not a directory", result.stdout)
        self.assertNotIn("Traceback", result.stderr)

    def test_hosts_through_mpirun_compares_versions(self):
        sysfs, procfs = self.fixture()
        out = os.path.join(self.tmp, "doctor.json")
        result = run_cli(["doctor", "--hosts", "localhost,127.0.0.1", "--mpirun", FAKE_MPIRUN, "--sysfs-root", sysfs,
                          "--procfs-root", procfs, "--json", out])
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        with open(out) as handle:
            document = json.load(handle)
        self.assertEqual(document["hosts"], ["localhost", "127.0.0.1"])
        self.assertEqual({c["host"] for c in document["checks"]}, {"localhost", "127.0.0.1", "*"})
        driver = next(c for c in document["checks"] if c["id"] == "versions" and c["subject"] == "nvidia_driver")
        self.assertEqual((driver["status"], driver["detail"]), ("pass", "all hosts: 580.95.05"))

    def test_hosts_inside_slurm_use_srun_as_baseline_does(self):
        """Inside an allocation (SLURM_JOB_ID, an srun offering pmix) `doctor --hosts` starts its ranks with srun,
        the launcher baseline chooses there (model/launcher.choose_launcher); --launcher mpirun still forces mpirun."""
        sysfs, procfs = self.fixture()
        bin_dir = os.path.join(self.tmp, "slurm_bin")
        os.makedirs(bin_dir)
        srun = os.path.join(bin_dir, "srun")
        with open(srun, "w") as handle:
            handle.write(FAKE_SRUN)
        os.chmod(srun, 0o755)
        srun_log, mpirun_log = os.path.join(self.tmp, "srun.log"), os.path.join(self.tmp, "mpirun.log")
        env = {"SLURM_JOB_ID": "4242", "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
               "FAKE_SRUN_LOG": srun_log, "FAKE_MPIRUN_LOG": mpirun_log}
        args = ["doctor", "--hosts", "localhost,127.0.0.1", "--mpirun", FAKE_MPIRUN, "--sysfs-root", sysfs, "--procfs-root", procfs]
        result = run_cli(args, env=env)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        launches = [json.loads(line) for line in read_text(srun_log).splitlines()]
        self.assertEqual([argv[argv.index("--nodelist") + 1] for argv in launches], ["localhost", "127.0.0.1"])
        self.assertTrue(all("--mpi=pmix" in argv and argv[argv.index("-n") + 1] == "1" for argv in launches), launches)
        self.assertFalse(os.path.exists(mpirun_log), "mpirun was not used")
        forced = run_cli(args + ["--launcher", "mpirun"], env=env)
        self.assertEqual(forced.returncode, 0, forced.stdout + forced.stderr)
        self.assertEqual(len(read_text(mpirun_log).splitlines()), 2)
        self.assertEqual(len(read_text(srun_log).splitlines()), 2, "srun not used again")


# A stand-in for Slurm's srun: `--mpi=list` offers pmix; a launch logs its argv and runs the program once.
FAKE_SRUN = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
if args == ["--mpi=list"]:
    print("MPI plugin types are...\\n\\tnone\\n\\tpmix")
    sys.exit(0)
with open(os.environ["FAKE_SRUN_LOG"], "a") as handle:
    handle.write(json.dumps(args) + "\\n")
i = 0
while i < len(args) and args[i].startswith("-"):
    i += 2 if args[i] in ("-n", "--nodes", "--nodelist", "--ntasks-per-node") else 1
os.execvp(args[i], args[i:])
"""


class Baseline(FixtureTest):
    def test_plan_shows_the_doctor_first(self):
        result = run_cli(["plan", "--hosts", "node5,node7", "--gpus-per-node", "8", "--hcas", "mlx5_0:1,mlx5_3:1",
                          "--bin-dir", FAKE_BIN, "--mpirun", "mpirun", "--results", self.results, "--run-id", "P",
                          "--sysfs-root", "/srv/sys"])
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        run = os.path.join(self.results, "P")
        for index, host in enumerate(("node5", "node7")):
            self.assertIn(f"-np 1 --host {host} -x NCCL_IB_HCA==mlx5_0:1,mlx5_3:1 ", lines[index])
            self.assertTrue(lines[index].endswith(f"scripts/cclbench doctor --host-only --as-host {host} "
                                                  f"--sysfs-root /srv/sys --json {run}/doctor/{host}.json"), lines[index])

    def test_baseline_writes_doctor_json_and_the_report_leads_with_it(self):
        sysfs, _ = doctor_fixture.build(os.path.join(self.tmp, "node"), gpu_width={"0000:05:00.0": "8"})
        result = run_cli(["baseline", "-b", "8K", "-e", "16K", "-n", "2", "-w", "1", "--no-tuning-probe",
                          "--sysfs-root", sysfs] + self.fake_args("D"))
        # A doctor fail fails the run (exit 1), and only it: the verdict's last line names it.
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("cclbench: doctor: fail (1 fail", result.stderr)
        self.assertIn("cclbench: error: FAILED (1): doctor.fail (doctor pcie_link)", result.stderr.strip().splitlines()[-1])
        run = os.path.join(self.results, "D")
        with open(os.path.join(run, "doctor.json")) as handle:
            document = json.load(handle)
        self.assertEqual(document["scope"], "cluster")
        hit = [c for c in document["checks"] if c["status"] == "fail"]
        self.assertEqual([(c["id"], c["subject"]) for c in hit], [("pcie_link", "GPU2 0000:05:00.0")])
        manifest = json.loads(read_text(os.path.join(run, "run_manifest.json")))
        self.assertEqual(manifest["plan"][0]["kind"], "doctor")
        doctor_point = manifest["points"][manifest["plan"][0]["name"]]
        self.assertEqual(doctor_point["status"], "complete", "a failing check is a finding, not a broken launch")
        report = read_text(os.path.join(run, "report.md"))
        self.assertEqual(report.splitlines()[0], "# FAILED (1)")
        anomalies = report[report.index("## Anomalies"):report.index("## Doctor (preflight)")]
        self.assertRegex(anomalies, r"\| doctor pcie_link \| \S+ GPU2 0000:05:00.0 \| link trained at x8 of x16")
        self.assertLess(report.index("## Doctor (preflight)"), report.index("## Environment"))
        self.assertIn("Overall **fail**", report)
        for schema, path in (("doctor.schema.json", os.path.join(run, "doctor.json")),
                             ("run_manifest.schema.json", os.path.join(run, "run_manifest.json")),
                             ("verdict.schema.json", os.path.join(run, "verdict.json"))):
            ok, errors = validate(schema, path)
            self.assertTrue(ok, errors)


if __name__ == "__main__":
    unittest.main()
