"""Whether this machine has an NVIDIA GPU, decided without cclbench's own detection.

GPU tests skip when there is no GPU. If they asked the product (cudaGetDeviceCount through
coll_perf, hosts.local_gpu_count), a broken detection would make every GPU test skip and stay
green. This asks the kernel (/dev/nvidia<N> device nodes) and, when present, `nvidia-smi -L`; a
GPU test that finds a GPU here but none through the product fails instead of skipping.
CUDA_VISIBLE_DEVICES set to "" or "-1" hides every GPU on purpose: then none is expected.
"""
import glob
import os
import re
import shutil
import subprocess


def hidden_on_purpose():
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    return value is not None and value.strip() in ("", "-1")


def independent_gpu_evidence():
    """A short description of the GPU evidence found ('' when none): device nodes or nvidia-smi lines."""
    if hidden_on_purpose():
        return ""
    nodes = sorted(path for path in glob.glob("/dev/nvidia*") if re.fullmatch(r"/dev/nvidia[0-9]+", path))
    if nodes:
        return f"device nodes {', '.join(nodes)}"
    tool = shutil.which("nvidia-smi")
    if tool:
        try:
            listing = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=60, check=False).stdout
        except (OSError, subprocess.SubprocessError):
            listing = ""
        gpus = [line for line in listing.splitlines() if line.startswith("GPU ")]
        if gpus:
            return f"nvidia-smi -L lists {len(gpus)} GPU(s)"
    return ""


def skip_or_fail_reason(product_reason):
    """For a GPU test whose product sees no GPU: ('skip', why) when none is here either, else ('fail', why)."""
    evidence = independent_gpu_evidence()
    if evidence:
        return "fail", f"a GPU is present ({evidence}) but cclbench sees none: {product_reason}"
    return "skip", f"no GPU ({product_reason}; no /dev/nvidia<N>, nvidia-smi -L lists none)"


if __name__ == "__main__":
    print(independent_gpu_evidence() or "none")
