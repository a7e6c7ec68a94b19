"""``pytest --device``'s machinery: DeviceMode, HostSyncCounter and the conftest plumbing.

The second device is torch's lazy-tensor backend (a CPU emulation that refuses to mix
devices, as CUDA does), so these run on a CPU-only CI.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import pnsolve as pn
from pnsolve.testing import DeviceMode, count_host_syncs
from pnsolve.testing.device import lazy_device, suite_device

pytest.importorskip("torch._lazy.ts_backend")
pytestmark = pytest.mark.cpu_only(reason="tests the --device machinery itself, on its own")

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def lazy() -> torch.device:
    return lazy_device()


def test_factories_of_test_code_land_on_the_device(lazy: torch.device) -> None:
    with DeviceMode(lazy, [HERE]) as mode:
        assert not mode.touched
        x = torch.zeros(3, dtype=torch.float64)
        assert x.device.type == "lazy" and mode.touched
        assert suite_device().type == "lazy"  # a factory in pnsolve.testing? not a root here
        explicit = torch.ones(2, device="cpu")
        assert explicit.device.type == "cpu"  # an explicit device= is kept
        mode.reset()
        assert not mode.touched


def test_library_factories_are_not_rescued(lazy: torch.device) -> None:
    # pnsolve itself is not a root: its constructors keep torch's default device, so a
    # forgotten device= shows up as a mismatch instead of being hidden by the mode
    with DeviceMode(lazy, [HERE]):
        op = pn.linops.ScaledIdentity(3, 2.0)
    assert op.device.type == "cpu"


def test_a_root_reached_through_a_symlink_is_redirected(lazy: torch.device, tmp_path: Path) -> None:
    real = tmp_path / "checkout"
    real.mkdir()
    (real / "make.py").write_text("import torch\n\ndef make():\n    return torch.zeros(2)\n")
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    code = compile((link / "make.py").read_text(), str(link / "make.py"), "exec")
    namespace: dict[str, object] = {}
    exec(code, namespace)  # frames name the file by the symlinked path
    with DeviceMode(lazy, [real]):
        assert namespace["make"]().device.type == "lazy"  # type: ignore[operator]


def test_draws_from_device_inputs_with_a_cpu_generator(lazy: torch.device) -> None:
    # torch.poisson / multinomial / bernoulli with a CPU generator on inputs the mode put
    # on the device: drawn on the CPU (the same numbers), returned on the device
    def draws(g: torch.Generator) -> list[torch.Tensor]:
        rates = torch.full((6,), 3.0, dtype=torch.float64)
        probs = torch.tensor([[0.2, 0.8], [0.5, 0.5]], dtype=torch.float64)
        return [torch.poisson(rates, generator=g), torch.multinomial(probs, 1, generator=g),
                torch.bernoulli(probs, generator=g)]  # fmt: skip

    expected = draws(torch.Generator().manual_seed(5))
    with DeviceMode(lazy, [HERE]):
        got = draws(torch.Generator().manual_seed(5))
    for a, b in zip(got, expected, strict=True):
        assert a.device.type == "lazy" and torch.equal(a.cpu(), b)


def test_draws_give_the_same_numbers_on_every_device(lazy: torch.device) -> None:
    g = torch.Generator().manual_seed(3)
    expected = torch.randn(5, generator=g, dtype=torch.float64)
    torch.manual_seed(4)
    expected_global = torch.rand(4)
    with DeviceMode(lazy, [HERE]):
        x = torch.randn(5, generator=g.manual_seed(3), dtype=torch.float64)
        torch.manual_seed(4)
        y = torch.rand(4)
    assert x.device.type == "lazy" and y.device.type == "lazy"
    assert torch.equal(x.cpu(), expected) and torch.equal(y.cpu(), expected_global)
    with DeviceMode(lazy, [HERE]):  # a leaf asked for stays a leaf (gradients reach it)
        leaf = torch.randn(3, generator=g.manual_seed(3), dtype=torch.float64, requires_grad=True)
    assert leaf.device.type == "lazy" and leaf.is_leaf and leaf.requires_grad


def test_numpy_views_go_through_the_host(lazy: torch.device) -> None:
    with DeviceMode(lazy, [HERE]):
        x = torch.arange(4.0)
        assert np.array_equal(x.numpy(), np.arange(4.0))
        assert np.array_equal(np.asarray(x), np.arange(4.0))
        assert torch.as_tensor(np.ones(3)).device.type == "lazy"  # a factory: redirected


def test_host_sync_counter_counts_reads_not_arithmetic(lazy: torch.device) -> None:
    x = torch.arange(6.0).to(lazy)
    with count_host_syncs() as syncs:
        y = (x * 2 + 1).sum()  # no read
        assert syncs.count == 0
        bool(y > 0)
        float(y)
        x[x > 2]  # boolean mask: a data-dependent shape
        torch.nonzero(x)
        x.to(torch.float64)  # a dtype change stays on the device
        x.cpu()
        x.to("cpu")
    assert syncs.count == 6, dict(syncs.by_op)


def test_conftest_device_option_counts_and_skips(pytester: pytest.Pytester) -> None:
    conftest = (Path(__file__).resolve().parents[1] / "conftest.py").read_text()
    pytester.makeconftest(conftest.replace("parents[1]", "parents[0]"))  # roots: ./tests
    tests = pytester.mkpydir("tests")
    (tests / "test_sample.py").write_text(
        textwrap.dedent(
            """
        import pytest, torch

        def test_on_device():
            assert torch.zeros(2).device.type == "lazy"

        def test_no_tensor():
            assert 1 + 1 == 2

        @pytest.mark.cpu_only(reason="host only")
        def test_host():
            pass
        """
        )
    )
    result = pytester.runpytest_subprocess("--device", "lazy", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        ["device lazy: 1 of 3 tests ran on lazy (33.3 %); 1 ran without touching it; 1 cpu_only*"]
    )
