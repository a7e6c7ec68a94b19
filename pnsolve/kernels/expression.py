"""Kernels from text: ``"rbf + periodic(period=12) * linear"`` (the CLI's ``--kernel``)."""

from __future__ import annotations

import re
from collections.abc import Callable

import torch

from .constant import Constant, White
from .kernel import Kernel
from .linear import Linear, Polynomial
from .matern import Matern
from .periodic import Cosine, Periodic
from .rational_quadratic import RationalQuadratic
from .rbf import RBF
from .spectral_mixture import SpectralMixture

__all__ = ["FAMILIES", "from_expression"]

_Builder = Callable[[int, dict[str, float], tuple[int, ...] | None], Kernel]


def _ard(d: int, dims: tuple[int, ...] | None) -> int:
    return d if dims is None else len(dims)


def _stationary(make: Callable[..., Kernel]) -> _Builder:
    def build(d: int, kw: dict[str, float], dims: tuple[int, ...] | None) -> Kernel:
        ls = kw.pop("lengthscale", 1.0)
        return make(lengthscale=ls, ard_dims=_ard(d, dims), active_dims=dims, **kw)

    return build


def _matern(nu: float) -> _Builder:
    def build(d: int, kw: dict[str, float], dims: tuple[int, ...] | None) -> Kernel:
        ls = kw.pop("lengthscale", 1.0)
        nu_ = kw.pop("nu", nu)
        return Matern(nu=nu_, lengthscale=ls, ard_dims=_ard(d, dims), active_dims=dims, **kw)

    return build


def _plain(make: Callable[..., Kernel]) -> _Builder:
    def build(d: int, kw: dict[str, float], dims: tuple[int, ...] | None) -> Kernel:
        return make(active_dims=dims, **kw)

    return build


def _polynomial(d: int, kw: dict[str, float], dims: tuple[int, ...] | None) -> Kernel:
    degree = kw.pop("degree", 2)
    if degree != int(degree):
        raise ValueError(f"polynomial degree must be an integer, got {degree}")
    return Polynomial(int(degree), active_dims=dims, **kw)


def _spectral_mixture(d: int, kw: dict[str, float], dims: tuple[int, ...] | None) -> Kernel:
    q = kw.pop("num_mixtures", 4)
    if q != int(q) or kw:
        raise ValueError(f"sm takes num_mixtures=<int> only, got {dict(kw, num_mixtures=q)}")
    return SpectralMixture(int(q), ard_dims=_ard(d, dims), active_dims=dims)


#: The family names an expression may use, with their keyword arguments' meaning.
FAMILIES: dict[str, _Builder] = {
    "rbf": _stationary(RBF),
    "matern": _matern(1.5),
    "matern12": _matern(0.5),
    "matern32": _matern(1.5),
    "matern52": _matern(2.5),
    "rq": _stationary(RationalQuadratic),
    "periodic": _plain(Periodic),
    "cosine": _plain(Cosine),
    "linear": _plain(Linear),
    "polynomial": _polynomial,
    "constant": _plain(Constant),
    "white": _plain(White),
    "sm": _spectral_mixture,
}

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>[-+*()\[\],=]))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"kernel expression {text!r}: cannot read {text[pos:]!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    """Recursive descent over the tokens.

    ``sum := product ('+' product)*``, ``product := factor ('*' factor)*``,
    ``factor := number | name ['(' key=number, ... ')'] ['[' int, ... ']'] | '(' sum ')'``.
    """

    def __init__(self, text: str, d: int) -> None:
        self.text, self.d = text, d
        self.toks = _tokens(text)
        self.i = 0

    def error(self, what: str) -> ValueError:
        where = " ".join(v for _, v in self.toks[: self.i])
        return ValueError(f"kernel expression {self.text!r}: {what} (after {where!r})")

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None, kind: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value) or (kind and tok[0] != kind):
            want = value or kind
            raise self.error(f"expected {want!r}, got {tok[1] if tok else 'the end'!r}")
        self.i += 1
        return tok[1]

    def parse(self) -> Kernel:
        out = self.sum()
        if self.peek() is not None:
            raise self.error(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        if not isinstance(out, Kernel):
            raise self.error("the expression is a number, not a kernel")
        return out

    def sum(self) -> Kernel | float:
        out = self.product()
        while self.peek() == ("op", "+"):
            self.take("+")
            right = self.product()
            if not isinstance(out, Kernel) or not isinstance(right, Kernel):
                raise self.error("only kernels can be added (write constant(value=c) for c)")
            out = out + right
        return out

    def product(self) -> Kernel | float:
        out = self.factor()
        while self.peek() == ("op", "*"):
            self.take("*")
            right = self.factor()
            if isinstance(out, Kernel):
                out = out * right
            elif isinstance(right, Kernel):
                out = right * out
            else:
                out = out * right
        return out

    def factor(self) -> Kernel | float:
        tok = self.peek()
        if tok is None:
            raise self.error("expected a kernel, got the end")
        kind, value = tok
        if kind == "num":
            self.i += 1
            return float(value)
        if value == "(":
            self.take("(")
            out = self.sum()
            self.take(")")
            return out
        if kind != "name":
            raise self.error(f"expected a kernel, got {value!r}")
        self.i += 1
        name = value.lower()
        if name not in FAMILIES:
            raise self.error(f"unknown kernel {value!r}; known: {', '.join(FAMILIES)}")
        kwargs = self.arguments() if self.peek() == ("op", "(") else {}
        dims = self.columns() if self.peek() == ("op", "[") else None
        try:
            return FAMILIES[name](self.d, kwargs, dims)
        except (TypeError, ValueError) as e:
            raise self.error(f"{value}: {e}") from e

    def arguments(self) -> dict[str, float]:
        self.take("(")
        kw: dict[str, float] = {}
        while self.peek() != ("op", ")"):
            key = self.take(kind="name")
            self.take("=")
            kw[key] = float(self.take(kind="num"))
            if self.peek() == ("op", ","):
                self.take(",")
        self.take(")")
        return kw

    def columns(self) -> tuple[int, ...]:
        self.take("[")
        dims = []
        while self.peek() != ("op", "]"):
            v = self.take(kind="num")
            if not v.isdigit():
                raise self.error(f"column indices are non-negative ints, got {v!r}")
            dims.append(int(v))
            if self.peek() == ("op", ","):
                self.take(",")
        self.take("]")
        return tuple(dims)


def from_expression(text: str, input_dim: int) -> Kernel:
    """A kernel from an expression such as ``"rbf + periodic(period=12) * linear[0]"``.

    Families (:data:`FAMILIES`): ``rbf``, ``matern`` (ν = 3/2), ``matern12``,
    ``matern32``, ``matern52``, ``rq``, ``periodic``, ``cosine``, ``linear``,
    ``polynomial``, ``constant``, ``white``, ``sm`` (spectral mixture). ``+`` adds,
    ``*`` multiplies (a number times a kernel is a fixed scale), parentheses group.
    A family may take keyword arguments in parentheses (its constructor's, numbers
    only: ``periodic(lengthscale=1.3, period=12)``, ``matern(nu=2.5)``,
    ``polynomial(degree=3, offset=0.5)``, ``sm(num_mixtures=3)``) and the columns it
    reads in brackets (``active_dims``: ``rbf[0, 2]``). Stationary families get one
    lengthscale per column they read (ARD); every value not given starts at the
    constructor's default.

    Parameters
    ----------
    text
        The expression (case-insensitive names).
    input_dim
        ``d``, the columns of the inputs.

    Returns
    -------
    Kernel

    Raises
    ------
    ValueError
        For a syntax error, an unknown family or argument (naming it and where), or a
        bad value.

    Examples
    --------
    >>> import pnsolve as pn
    >>> k = pn.kernels.from_expression("rbf + periodic(period=2) * linear", input_dim=1)
    >>> [type(p).__name__ for p in k.parts]
    ['RBF', 'Product']
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"kernel expression must be a non-empty string, got {text!r}")
    if isinstance(input_dim, bool) or not isinstance(input_dim, int) or input_dim < 1:
        raise ValueError(f"input_dim must be a positive int, got {input_dim!r}")
    with torch.no_grad():
        return _Parser(text, input_dim).parse()
