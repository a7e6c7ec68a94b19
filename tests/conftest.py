"""Test-suite configuration: hypothesis without wall-clock deadlines (CI is noisy)."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "pnsolve",
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.load_profile("pnsolve")


# ----------------------------------------------------------------------------------
# Dense SPD matrices for the Krylov and preconditioner tests, from pnsolve.problems.

import contextlib  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import pnsolve as pn  # noqa: E402


def make_spd(
    n: int,
    spectrum: torch.Tensor | None = None,
    *,
    cond: float = 100.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """``Q diag(λ) Qᵀ`` with Haar-random ``Q``; default λ log-spaced from 1 to 1/cond."""
    lam = pn.problems.spectrum("exponential", n, cond=cond) if spectrum is None else spectrum
    g = torch.Generator().manual_seed(seed)
    return pn.problems.spd_from_spectrum(
        lam.to(torch.float64), generator=g, dtype=dtype
    ).A.to_dense()


def make_kernel(
    n: int, noise: float = 1e-2, seed: int = 0, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """RBF Gram matrix (lengthscale 0.2) of ``n`` uniform points in [0, 1]² plus ``noise · I``."""
    g = torch.Generator().manual_seed(seed)
    system = pn.problems.kernel_gram(
        n, 2, lengthscale=0.2, noise=noise, generator=g, dtype=dtype, compute_spectrum=False
    )
    return system.A.to_dense()


@pytest.fixture(autouse=True)
def _keops_build_lock(request: pytest.FixtureRequest):
    """One KeOps test at a time across xdist workers: pykeops compiles into a shared
    build folder without a lock of its own, so two workers building one formula race.

    An OS file lock (released by the kernel if a worker dies) rather than
    ``xdist_group``: pytest-xdist 3.8 renames node ids through an attribute pytest 9
    no longer reads, so ``--dist loadgroup`` does not group there.
    """
    if request.node.get_closest_marker("keops") is None:
        yield
        return
    import fcntl
    import os
    import tempfile

    folder = os.environ.get("KEOPS_CACHE_FOLDER") or tempfile.gettempdir()
    os.makedirs(folder, exist_ok=True)
    device = _target_device(request.config)
    with open(os.path.join(folder, ".pnsolve-tests.lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if device is not None and device.type == "cuda":
                # pykeops can crash the process compiling on a GPU: ask a child first
                from pnsolve.kernels.backends.keops_probe import keops_runs_on

                if not keops_runs_on(device):
                    pytest.skip(f"pykeops does not compute on {device} (its probe failed)")
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture
def spd():
    """Factory of dense SPD test matrices (see :func:`make_spd`)."""
    return make_spd


def make_rbf_system(
    n: int, lengthscale: float, noise: float, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(K + noise·I, b)``: RBF Gram of ``n`` standard normal 3-d points, a normal ``b``.

    κ grows with ``n / noise`` (n = 1500: ℓ = 0.5, σ² = 0.1 gives about 1e3).
    """
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    K = pn.kernels.RBF(lengthscale=lengthscale)(X, X).detach()
    K.diagonal().add_(noise)
    return K, torch.randn(n, generator=g, dtype=torch.float64)


@pytest.fixture
def rbf_system():
    """Factory of RBF kernel systems (see :func:`make_rbf_system`)."""
    return make_rbf_system


@pytest.fixture
def kernel():
    """Factory of dense kernel Gram test matrices (see :func:`make_kernel`)."""
    return make_kernel


@contextlib.contextmanager
def _torch_threads(n: int):
    """Torch's intra-op thread count set to ``n`` for a block, restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def torch_threads():
    """``with torch_threads(n): ...`` runs a block with ``n`` torch threads."""
    return _torch_threads


@pytest.fixture
def one_thread():
    """One torch thread for the test, restored afterwards.

    For modules of many small products (``pytestmark = pytest.mark.usefixtures(
    "one_thread")``): intra-op threading only adds synchronisation there, up to 10×
    slower on a busy 2-core machine.
    """
    with _torch_threads(1):
        yield


# ----------------------------------------------------------------------------------
# pytest --device DEVICE: the suite's tensors on another device (docs/gpus.md).
#
# Test code (tests/, tutorials/) and the test-data helpers of the package
# (pnsolve.testing, pnsolve.problems, pnsolve.datasets) create their tensors on DEVICE
# through pnsolve.testing.device.DeviceMode; the library itself gets no default device, so
# a constructor that forgets `device=` shows up as a mismatch. Tests that cannot run there
# carry `@pytest.mark.cpu_only(reason=...)` and are skipped under another device. The
# summary names how many tests touched the device. `lazy` is torch's lazy-tensor
# (TorchScript) backend: a second device on a CPU-only machine, slow, for finding device
# mismatches without a GPU.

import time  # noqa: E402
from pathlib import Path  # noqa: E402

_ROOT = Path(__file__).resolve().parents[1]
_DEVICE_ROOTS = [
    _ROOT / "tests",
    _ROOT / "tutorials",
    _ROOT / "pnsolve" / "testing",
    _ROOT / "pnsolve" / "problems",
    _ROOT / "pnsolve" / "datasets",
]
_DEVICE_KEY = pytest.StashKey[object]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--device",
        default=None,
        help="device the suite's tensors are created on (default: cpu, no redirection); "
        "e.g. cuda, cuda:1, lazy (a CPU emulation of a second device)",
    )
    parser.addoption(
        "--time-budget",
        type=float,
        default=None,
        help="seconds per process after which the remaining tests are skipped ('time "
        "budget'), so a lent machine's run ends with its reports (make gpu-check)",
    )


def _target_device(config: pytest.Config) -> torch.device | None:
    name = config.getoption("--device")
    return None if name is None else torch.device(name)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cpu_only(reason): runs on CPU only; skipped under --device other than cpu (the "
        "reason is required)",
    )
    device = _target_device(config)
    config.stash[_DEVICE_KEY] = None
    config._device_counts = {"on": 0, "off": 0, "cpu_only": 0}  # type: ignore[attr-defined]
    if device is None:
        return
    if device.type == "lazy":
        from pnsolve.testing.device import lazy_device

        lazy_device()
    elif device.type == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError(f"--device {device}: torch.cuda.is_available() is False")
    from pnsolve.testing.device import DeviceMode

    mode = DeviceMode(device, _DEVICE_ROOTS)
    mode.__enter__()  # for the whole process: collection, fixtures of every scope, tests
    config.stash[_DEVICE_KEY] = mode


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    device = _target_device(config)
    for item in items:
        marker = item.get_closest_marker("cpu_only")
        if marker is None:
            continue
        reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
        if not reason:
            raise pytest.UsageError(f"{item.nodeid}: cpu_only needs reason=")
        if device is not None and device.type != "cpu":
            item.add_marker(pytest.mark.skip(reason=f"cpu_only: {reason}"))


_START = time.monotonic()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    budget = item.config.getoption("--time-budget")
    if budget is not None and time.monotonic() - _START > budget:
        pytest.skip(f"time budget: {budget:.0f} s spent")
    mode = item.config.stash.get(_DEVICE_KEY, None)
    if mode is not None:
        mode.reset()  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    mode = item.config.stash.get(_DEVICE_KEY, None)
    if mode is not None and report.when == "call":
        report.user_properties.append(("on_device", bool(mode.touched)))  # type: ignore[attr-defined]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # runs where the results are gathered (the xdist controller, or the only process)
    counts = getattr(_CONFIG, "_device_counts", None)
    if counts is None:
        return
    if report.when == "setup" and report.skipped and "cpu_only:" in str(report.longrepr):
        counts["cpu_only"] += 1
    if report.when == "call" and not report.skipped:
        on = dict(report.user_properties).get("on_device")
        if on is not None:
            counts["on" if on else "off"] += 1


_CONFIG: pytest.Config | None = None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    global _CONFIG
    _CONFIG = session.config


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    device = _target_device(config)
    if device is None:
        return
    c = config._device_counts  # type: ignore[attr-defined]
    ran = c["on"] + c["off"]
    total = ran + c["cpu_only"]
    share = 100.0 * c["on"] / total if total else 0.0
    terminalreporter.write_line(
        f"device {device}: {c['on']} of {total} tests ran on {device} ({share:.1f} %); "
        f"{c['off']} ran without touching it; {c['cpu_only']} cpu_only (skipped)"
    )
