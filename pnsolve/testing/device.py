"""Run a test suite on another device, and count host synchronisations.

Two :class:`~torch.overrides.TorchFunctionMode` helpers for test suites (pnsolve's own
``pytest --device cuda`` is built on them):

* :class:`DeviceMode` places the tensors that *test code* creates on a device: tensor
  factories (``torch.randn``, ``torch.zeros``, ``torch.tensor``, ...) called without a
  ``device=`` from the files it is told about (the test suite, its helpers) get that
  device, and NumPy views (``t.numpy()``, ``np.asarray(t)``) taken there read device
  tensors through the host. (``torch.from_numpy`` takes no tensor, so no mode sees it:
  tests convert arrays with ``torch.as_tensor``, a factory.)
  A draw with a generator on another device (``torch.Generator()`` is a CPU generator),
  or from torch's global generator, is made on the CPU and moved, so a seed gives the
  same numbers on every device and the suite's statistical tests see the same data. Calls from
  anywhere else (the library under test, torch itself, peers) are left alone: the
  library must follow its inputs' device by itself, and a factory that forgets
  ``device=`` shows up as a device mismatch instead of being rescued by a global default.
* :class:`HostSyncCounter` counts the operations that make the host wait for a CUDA
  stream (``.item()``, ``bool(t)``, ``.tolist()``, ``.cpu()``, ``nonzero``, boolean-mask
  indexing, error-checked ``torch.linalg`` factorisations, ...). It works on any device,
  so a CPU-only CI can hold an iteration to its one stopping check.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

__all__ = ["DeviceMode", "HostSyncCounter", "count_host_syncs", "lazy_device", "suite_device"]

#: torch's directory as imported and with symbolic links resolved
_TORCH_DIRS = tuple({str(Path(torch.__file__).parent), str(Path(torch.__file__).resolve().parent)})


#: Random factories: drawn on the CPU when no generator says otherwise (same numbers).
#: (``torch.normal`` takes no ``device=`` and is not a factory torch redirects)
_RANDOM = frozenset({torch.rand, torch.randn, torch.randint, torch.randperm})

#: Draws from tensor inputs with a ``generator=``: from test code whose inputs the mode
#: moved to the device, drawn where the generator lives (same numbers), then moved back.
_TENSOR_DRAWS: frozenset[Callable[..., Any]] = frozenset(
    {torch.poisson, torch.multinomial, torch.bernoulli, torch.normal}
)

#: NumPy views of a tensor; from test code they read the tensor through the host.
_HOST_VIEWS: frozenset[Callable[..., Any]] = frozenset(
    {torch.Tensor.numpy, torch.Tensor.__array__}  # type: ignore[arg-type]
)


def suite_device() -> torch.device:
    """The device test code creates its tensors on.

    The target of an active :class:`DeviceMode` (``pytest --device``), else torch's
    default device. For objects that take a ``device=`` but are not tensors
    (``Closure``, random Fourier features, ...), built in tests:
    ``Closure(fn, shape, dtype=..., device=suite_device())``.
    """
    return torch.empty(0).device  # a factory call from pnsolve/testing: redirected


def lazy_device() -> torch.device:
    """Torch's lazy-tensor device (TorchScript backend), initialised once per process.

    A second device on a CPU-only machine: mixing it with CPU tensors in one operation
    raises, as CUDA does, and reading a value runs the recorded graph (a host
    synchronisation). Slow: for small problems. ``init()`` may be called only once per
    process; this checks first.
    """
    import torch._lazy.ts_backend as ts_backend

    try:
        torch.zeros(1).to("lazy")
    except (NotImplementedError, RuntimeError):
        ts_backend.init()
    return torch.device("lazy")


def _caller_file() -> str:
    """File of the innermost Python frame outside this module and outside torch."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_TORCH_DIRS) and name != __file__:
            return name
        frame = frame.f_back  # type: ignore[assignment]
    return ""


class _CallMode(TorchFunctionMode):
    """A torch function mode whose subclasses handle each call in ``_call``.

    Torch passes ``kwargs=None`` for a call without keyword arguments; ``_call``
    always gets a dict.
    """

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        return self._call(func, args, {} if kwargs is None else kwargs)

    def _call(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run (or stand in for) ``func(*args, **kwargs)`` and return its result.

        Parameters
        ----------
        func
            The torch function or tensor method called.
        args, kwargs
            Its positional arguments and keyword arguments (a dict, possibly empty).

        Returns
        -------
        Any
            What the call returns under the mode.
        """
        raise NotImplementedError


class DeviceMode(_CallMode):
    """Place tensors created by chosen source files on ``device``.

    Parameters
    ----------
    device
        Target device, e.g. ``"cuda"`` (``torch.device`` or string).
    roots
        Directories (or files) whose code is redirected: a factory called without
        ``device=`` from a file below one of them creates its tensor on ``device``.
        Factories called from anywhere else keep torch's own default.

    Attributes
    ----------
    touched : bool
        Whether an operation has returned a tensor on ``device`` since the last
        :meth:`reset` (pnsolve's conftest counts the tests that ran on the device by it).

    Notes
    -----
    The mode is thread-local (as every torch function mode): threads and subprocesses a
    test starts create their tensors as torch would without it.
    """

    def __init__(self, device: torch.device | str, roots: Iterable[str | Path]) -> None:
        super().__init__()
        self.device = torch.device(device)
        self.roots = tuple(str(Path(r).resolve()) for r in roots)
        self.touched = False
        self._factories = _device_constructors()
        self._verdicts: dict[str, bool] = {}

    def reset(self) -> None:
        """Forget that the device was touched."""
        self.touched = False

    def _on_device(self, t: torch.Tensor) -> bool:
        dev = t.device
        return dev.type == self.device.type and (
            self.device.index is None or dev.index == self.device.index
        )

    def _redirects(self, filename: str) -> bool:
        verdict = self._verdicts.get(filename)
        if verdict is None:
            real = os.path.realpath(filename)  # a checkout reached through a symlink
            verdict = any(real.startswith(root) for root in self.roots)
            self._verdicts[filename] = verdict
        return verdict

    def _call(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if func in self._factories and kwargs.get("device") is None:
            redirect = self._redirects(_caller_file())
            out = self._create(func, args, kwargs) if redirect else func(*args, **kwargs)
        elif func in _TENSOR_DRAWS and self._off_generator(args, kwargs):
            g: torch.Generator = kwargs["generator"]
            home = next(a.device for a in args if isinstance(a, torch.Tensor))
            moved = [a.to(g.device) if isinstance(a, torch.Tensor) else a for a in args]
            out = func(*moved, **kwargs).to(home)
        elif func in _HOST_VIEWS and self._redirects(_caller_file()):
            # test code reading a device tensor into NumPy: through the host, explicitly
            out = func(args[0].cpu(), *args[1:], **kwargs)
        else:
            out = func(*args, **kwargs)
        if not self.touched and isinstance(out, torch.Tensor) and self._on_device(out):
            self.touched = True
        return out

    def _off_generator(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """A draw from test code with a generator on another device than its inputs."""
        g = kwargs.get("generator")
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        return (
            isinstance(g, torch.Generator)
            and first is not None
            and first.device.type != g.device.type
            and self._redirects(_caller_file())
        )

    def _create(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]):
        generator = kwargs.get("generator")
        if isinstance(generator, torch.Generator):
            source = generator.device
        elif func in _RANDOM:
            source = torch.device("cpu")  # torch's global CPU generator, as without the mode
        else:
            source = self.device
        if source.type != self.device.type:
            # draw where the generator lives (same numbers on every device), then move;
            # a leaf asked for (requires_grad=True) stays a leaf on the device
            grad = bool(kwargs.get("requires_grad", False))
            kw = {**kwargs, "device": source}
            if grad:
                kw["requires_grad"] = False
            out = func(*args, **kw).to(self.device)
            return out.requires_grad_(True) if grad else out
        return func(*args, **{**kwargs, "device": self.device})


def _bool_index(index: object) -> bool:
    """Whether an indexing key holds a boolean tensor (a data-dependent shape)."""
    keys = index if isinstance(index, tuple) else (index,)
    return any(isinstance(k, torch.Tensor) and k.dtype == torch.bool for k in keys)


def _always(*args: Any, **kwargs: Any) -> bool:
    return True


def _to_host(self: torch.Tensor, *args: Any, **kwargs: Any) -> bool:
    """``t.to(...)`` copies between devices (a transfer waits for the stream)."""
    target = kwargs.get("device", args[0] if args else None)
    if isinstance(target, torch.Tensor):
        target = target.device
    if isinstance(target, torch.dtype) or target is None:
        return False
    try:
        return torch.device(target).type != self.device.type
    except (TypeError, RuntimeError):
        return False


def _where(*args: Any, **kwargs: Any) -> bool:
    return len(args) + len(kwargs) == 1


def _repeat_interleave(*args: Any, **kwargs: Any) -> bool:
    repeats = kwargs.get("repeats", args[1] if len(args) > 1 else None)
    return isinstance(repeats, torch.Tensor) and kwargs.get("output_size") is None


def _getitem(self: torch.Tensor, index: object, *args: Any) -> bool:
    return _bool_index(index)


T = torch.Tensor
#: Operations that synchronise the host with the device stream, with a predicate on the
#: call's arguments (whether this call does).
SYNCING: dict[Callable[..., Any], Callable[..., bool]] = {
    **dict.fromkeys(
        (T.item, T.tolist, T.__bool__, T.__int__, T.__float__, T.__index__, T.__complex__),
        _always,
    ),
    **dict.fromkeys((T.numpy, T.cpu), _always),
    **dict.fromkeys((T.nonzero, torch.nonzero, T.argwhere, torch.argwhere), _always),
    **dict.fromkeys((T.masked_select, torch.masked_select, T.unique, torch.unique), _always),
    **dict.fromkeys((torch.unique_consecutive, T.unique_consecutive, torch.bincount), _always),
    **dict.fromkeys((T.bincount,), _always),
    # error-checked factorisations read their `info` on the host (the `_ex` forms do not)
    **dict.fromkeys(
        (
            torch.linalg.cholesky,
            torch.cholesky,
            torch.linalg.inv,
            torch.inverse,
            torch.linalg.solve,
            torch.linalg.eigh,
            torch.linalg.eigvalsh,
        ),
        _always,
    ),
    T.to: _to_host,
    torch.where: _where,
    T.repeat_interleave: _repeat_interleave,
    torch.repeat_interleave: _repeat_interleave,
    T.__getitem__: _getitem,
    T.__setitem__: _getitem,
}


class HostSyncCounter(_CallMode):
    """Count host synchronisations while active (see :func:`count_host_syncs`).

    Attributes
    ----------
    count : int
        Synchronising operations seen.
    by_op : collections.Counter
        The same, per operation name.
    """

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.by_op: Counter[str] = Counter()

    def _call(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        syncs = SYNCING.get(func)
        if syncs is not None and syncs(*args, **kwargs):
            self.count += 1
            self.by_op[getattr(func, "__name__", repr(func))] += 1
        return func(*args, **kwargs)


def count_host_syncs() -> HostSyncCounter:
    """A context manager counting host synchronisations of the code inside it.

    Returns
    -------
    HostSyncCounter
        Use as ``with count_host_syncs() as syncs: ...``; then ``syncs.count``.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> from pnsolve.testing import count_host_syncs
    >>> A = torch.eye(3, dtype=torch.float64); b = torch.ones(3, dtype=torch.float64)
    >>> with count_host_syncs() as syncs:
    ...     _ = bool((A @ b).sum() > 0)
    >>> syncs.count
    1
    """
    return HostSyncCounter()
