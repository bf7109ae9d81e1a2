"""A fake sysfs root for coll_perf --sysfs-root with two RoCE rails (mlx5_0:1 and mlx5_3:1), whose error counter
`counters/port_rcv_errors` on one rail grows by a known amount inside one chosen case of a real coll_perf run.

coll_perf reads every HCA counter once before and once after each case (bench/evidence/rails.cpp, on each node's
local rank 0) and records the growth of the error counters as evidence.rails.nodes[].ib_ports[].error_increments.
To make the growth land inside one case's window, and nowhere else, the counter file is a FIFO served by a thread:
each snapshot opens it once, so the server sees every read and knows whose it is (the reader's --point, from
/proc). It serves BASE until the first read of a process of the chosen point (that point's first before-snapshot),
then BASE + increment to every later read: the counter grows between the first case's two snapshots. Every read has
a FIFO of its own (a fresh one takes the name as each read is served), so no read is served twice or missed. The
log of served reads lets a test check that the reads came from where it expects."""
import errno
import os
import threading
import time

BASE = 1000
ERROR_COUNTER = "port_rcv_errors"  # a name coll_perf counts as an error counter ("err")
RAILS = {"mlx5_0": "eth0", "mlx5_3": "eth3"}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text + "\n")


def build_tree(root):
    """Two active 400G RoCE ports with static byte counters and zeroed error counters."""
    for hca in RAILS:
        port = os.path.join(root, "class", "infiniband", hca, "ports", "1")
        write(os.path.join(port, "state"), "4: ACTIVE")
        write(os.path.join(port, "phys_state"), "5: LinkUp")
        write(os.path.join(port, "rate"), "400 Gb/sec (4X NDR)")
        write(os.path.join(port, "link_layer"), "Ethernet")
        for name in ("port_xmit_data", "port_rcv_data"):
            write(os.path.join(port, "counters", name), "4096")
        for name in ("symbol_error", ERROR_COUNTER):
            write(os.path.join(port, "counters", name), "0")
    return root


def _point_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().decode(errors="replace").split("\0")
    except OSError:
        return None
    return argv[argv.index("--point") + 1] if "--point" in argv[:-1] else ""


def _reader_point(fifo):
    """The --point ('' without one) of the coll_perf process that holds `fifo` open, or None."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"coll_perf" not in handle.read():
                    continue
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == fifo:
                    return _point_of(pid)
            except OSError:
                continue
    return None


class GrowingErrorCounter:
    """`with GrowingErrorCounter(root, "mlx5_3", 7, point="local.mpi4") as counter:` run coll_perf; then
    counter.served is [(reader point, value served)] in read order. increment 0 serves BASE to every read."""

    def __init__(self, root, hca, increment, point=None):
        self.fifo = os.path.join(root, "class", "infiniband", hca, "ports", "1", "counters", ERROR_COUNTER)
        # The next read's FIFO is made outside the counters folder (coll_perf reads every *err* name there).
        self.spare = os.path.join(os.path.dirname(os.path.abspath(root)), f".{hca}-{ERROR_COUNTER}.next")
        self.increment = increment
        self.point = point  # None: the first read of any process
        self.served = []
        self.errors = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        os.remove(self.fifo)
        os.mkfifo(self.fifo)
        self._thread.start()
        return self

    def __exit__(self, *_exc):
        self._stop.set()
        self._thread.join(timeout=10)

    def _value(self):
        # Grown once the chosen point has had its first read (its first case's before-snapshot).
        grown = any(self.point is None or reader == self.point for reader, _value in self.served)
        return BASE + (self.increment if grown else 0)

    def _serve(self):
        while not self._stop.is_set():
            try:
                fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)  # succeeds only while a reader has it open
            except OSError as error:
                if error.errno != errno.ENXIO:
                    self.errors.append(str(error))
                    return
                time.sleep(0.002)
                continue
            try:
                point = None
                deadline = time.monotonic() + 10
                while point is None and time.monotonic() < deadline:  # the reader's fd shows once its open returns
                    point = _reader_point(self.fifo)
                # Each read gets its own FIFO: a fresh one takes the name before this reader gets its value, so
                # its next open (the next snapshot) can only find the fresh one.
                os.mkfifo(self.spare)
                os.rename(self.spare, self.fifo)
                value = self._value()
                os.write(fd, f"{value}\n".encode())
                self.served.append((point, value))
            except OSError as error:
                self.errors.append(str(error))
                return
            finally:
                os.close(fd)
