"""The GP models take NumPy arrays as pn.cg does: same results as tensors, dtype kept.

Complex arrays and tensors are refused with a TypeError naming the argument.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pnsolve as pn
from pnsolve.gp._checks import as_tensor, check_inputs, check_targets

pytestmark = pytest.mark.cpu_only(reason="NumPy inputs are host data: these models run on the CPU")


def _data(n=30, t=6, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    y = np.sin(5 * X[:, 0]) + 0.1 * rng.normal(size=n)
    Xs = rng.uniform(size=(t, d))
    return X, y, Xs


def _kernel():
    return pn.kernels.RBF(lengthscale=0.4, outputscale=1.0)


def _itergp(stop=None):
    stop = stop or pn.stopping.MaxIterations(10)
    return pn.gp.IterGP(_kernel(), noise=0.1, policy=pn.policies.CG(), stopping=stop)


def _models():
    stop = pn.stopping.MaxIterations(10)
    return {
        "ExactGP": lambda: pn.gp.ExactGP(_kernel(), noise=0.1),
        "IterGP": lambda: pn.gp.IterGP(
            _kernel(), noise=0.1, policy=pn.policies.CG(), stopping=stop
        ),
    }


@pytest.mark.parametrize("model", ["ExactGP", "IterGP"])
@pytest.mark.parametrize("np_dtype", [np.float64, np.float32])
def test_regression_models_accept_numpy_and_keep_its_dtype(model, np_dtype):
    X, y, Xs = (a.astype(np_dtype) for a in _data())
    torch_dtype = torch.from_numpy(np.zeros(0, dtype=np_dtype)).dtype
    post_np = _models()[model]().fit(X, y).posterior(Xs)
    gp_t = _models()[model]().fit(torch.from_numpy(X), torch.from_numpy(y))
    post_t = gp_t.posterior(torch.from_numpy(Xs))
    assert post_np.mean.dtype == torch_dtype and post_np.var.dtype == torch_dtype
    assert isinstance(post_np.mean, torch.Tensor) and post_np.mean.shape == (6,)
    assert torch.equal(post_np.mean, post_t.mean) and torch.equal(post_np.var, post_t.var)
    # a tensor-fitted model predicts at NumPy test points (and the reverse)
    assert torch.equal(gp_t.posterior(Xs).mean, post_t.mean)


def test_integer_numpy_arrays_take_the_reference_dtype():
    X, y, _ = _data()
    gp = pn.gp.ExactGP(_kernel(), noise=0.1).fit(X, np.round(10 * y).astype(np.int64))
    assert gp.y.dtype == torch.float64
    post = gp.posterior(np.array([[0, 1], [1, 0]]))  # integer test inputs: X's dtype
    assert post.mean.dtype == torch.float64
    Xf = torch.from_numpy(X).float()
    assert check_inputs(np.array([[0, 1]]), "Xs", 2, like=Xf).dtype == torch.float32
    assert check_targets(np.array([1] * 30), Xf).dtype == torch.float32


def _classifier() -> pn.gp.IterNCGP:
    return pn.gp.IterNCGP(
        _kernel(),
        likelihood=pn.likelihoods.Bernoulli(),
        policy=pn.policies.CG(),
        stopping=pn.stopping.MaxIterations(30),
        max_newton_steps=5,
    )


def test_iterncgp_accepts_numpy_inputs_and_tensor_labels():
    X, y, Xs = _data()
    labels = torch.from_numpy((y > 0).astype(np.int64))
    m = _classifier().fit(X, labels)
    post = m.posterior(Xs)
    assert post.mean.dtype == torch.float64 and post.mean.shape == (6,)
    p = m.predict_proba(torch.from_numpy(Xs))
    assert p.shape == (6,) and bool(((p > 0) & (p < 1)).all())


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_complex_inputs_are_refused_naming_the_argument(kind):
    X, y, Xs = _data()
    Xc = X.astype(np.complex128) if kind == "numpy" else torch.from_numpy(X).to(torch.complex128)
    with pytest.raises(TypeError, match="X must be real, got complex128"):
        pn.gp.ExactGP(_kernel(), noise=0.1).fit(Xc, y)
    yc = y.astype(np.complex64) if kind == "numpy" else torch.from_numpy(y).to(torch.complex64)
    with pytest.raises(TypeError, match="y must be real, got complex64"):
        _itergp().fit(X, yc)
    gp = pn.gp.ExactGP(_kernel(), noise=0.1).fit(X, y)
    Xsc = Xs.astype(np.complex128) if kind == "numpy" else torch.from_numpy(Xs) * 1j
    with pytest.raises(TypeError, match="Xs must be real, got complex128"):
        gp.posterior(Xsc)


def test_other_bad_numpy_inputs_name_the_argument():
    X, y, _ = _data()
    gp = pn.gp.ExactGP(_kernel(), noise=0.1)
    with pytest.raises(TypeError, match="X must be a numeric array"):
        gp.fit(X.astype(object), y)
    with pytest.raises(TypeError, match="X has unsupported dtype"):
        gp.fit(X.astype(np.float16), y)
    with pytest.raises(TypeError, match=r"X must be a torch\.Tensor or a NumPy array, got list"):
        gp.fit(X.tolist(), y)
    with pytest.raises(ValueError, match="X contains NaN"):
        gp.fit(np.where(X > 0.5, np.nan, X), y)
    with pytest.raises(TypeError, match=r"y has dtype torch\.float32"):
        gp.fit(X, y.astype(np.float32))  # float arrays keep their dtype, as in pn.cg
    with pytest.raises(ValueError, match=r"y must have shape \(30,\)"):
        gp.fit(X, y[:-1])


def test_as_tensor_shares_memory_unless_it_must_copy():
    X = np.arange(6.0).reshape(3, 2)
    assert np.shares_memory(as_tensor(X, "X").numpy(), X)
    flipped = as_tensor(X[::-1], "X")  # negative strides: copied
    assert torch.equal(flipped, torch.tensor(X[::-1].copy()))
    X.flags.writeable = False
    assert torch.equal(as_tensor(X, "X"), torch.from_numpy(X.copy()))
    labels = as_tensor(np.array([0, 2, 1]), "y", int_dtype=None)
    assert labels.dtype == torch.int64


def test_iterncgp_accepts_numpy_labels_and_test_points():
    X, y, Xs = _data()
    m = _classifier().fit(X, (y > 0).astype(np.int64))
    assert m.predict_proba(Xs).shape == (6,)
