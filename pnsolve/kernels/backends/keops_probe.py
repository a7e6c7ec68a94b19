"""Whether KeOps really computes on a CUDA device, asked of a child process.

pykeops can import and still crash the process when it compiles its first formula on a
GPU: on an H200 with CUDA 13.0 and torch 2.11, pykeops 2.3's NVRTC code generation
ended in a segmentation fault (2026-11-28, ``make gpu-check``; KeOps users report the
same on other set-ups, getkeops/keops#398 and #330). A crash cannot be caught in the
process that has it, so before ``backend="auto"`` picks KeOps on a CUDA device, a child
process compiles and runs one small RBF reduction there and compares it with torch. The
verdict is kept for the life of the process (one child per device index); the compiled
formula lands in KeOps's own build cache, so the check costs a Python start-up and one
compile the first time, and a start-up afterwards. ``backend="keops"`` asked for by name
is not probed.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys

import torch

from .keops import keops_available

__all__ = ["PROBE_TIMEOUT_S", "keops_runs_on"]

logger = logging.getLogger("pnsolve.linops")

#: Seconds the child may take (a first NVRTC compile takes seconds to a minute).
PROBE_TIMEOUT_S = 600

#: The child: one RBF sum reduction in float32 on ``argv[1]``, checked against torch.
_CHILD = """
import sys
import torch
from pykeops.torch import LazyTensor

dev = torch.device(sys.argv[1])
g = torch.Generator().manual_seed(0)
x = torch.rand(64, 3, generator=g).to(dev)
v = torch.rand(64, 1, generator=g).to(dev)
xi, xj = LazyTensor(x[:, None, :]), LazyTensor(x[None, :, :])
out = (-((xi - xj) ** 2).sum(-1)).exp() @ v
ref = torch.exp(-torch.cdist(x, x).square()) @ v
err = float((out - ref).abs().max())
print(f"keops-probe max-error {err:.3g}")
sys.exit(0 if err <= 1e-4 else 3)
"""


def _run_child(device: str) -> subprocess.CompletedProcess[str]:
    """Run :data:`_CHILD` on ``device`` with this interpreter and this ``sys.path``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.run(
        [sys.executable, "-c", _CHILD, device],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        env=env,
        check=False,
    )


@functools.cache
def _verdict(device: str) -> bool:
    try:
        done = _run_child(device)
    except subprocess.TimeoutExpired:
        logger.warning(
            "pykeops did not finish a probe formula on %s within %d s: "
            'backend="auto" uses "chunked" there',
            device,
            PROBE_TIMEOUT_S,
        )
        return False
    if done.returncode == 0:
        logger.info("pykeops runs on %s (%s)", device, done.stdout.strip())
        return True
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    logger.warning(
        "pykeops imports but its probe formula failed on %s (exit status %d%s): "
        'backend="auto" uses "chunked" there; backend="keops" asked for by name may crash '
        "the process. Last lines: %s",
        device,
        done.returncode,
        ", a crash" if done.returncode < 0 else "",
        " | ".join(tail),
    )
    return False


def keops_runs_on(device: torch.device) -> bool:
    """Whether KeOps computes correctly on ``device``.

    Parameters
    ----------
    device
        A torch device. On a CUDA device, the first call per device index runs a probe
        in a child process (see the module docstring); elsewhere this is
        :func:`~pnsolve.kernels.backends.keops.keops_available`.

    Returns
    -------
    bool
        ``False`` when pykeops does not import, or its probe crashed, timed out or
        computed a wrong value (each logged at WARNING on ``pnsolve.linops``).
    """
    if not keops_available():
        return False
    if device.type != "cuda":
        return True
    index = device.index
    if index is None:
        index = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return _verdict(f"cuda:{index}")
