"""CaGP's training run: Adam on the hyperparameters and the actions, a log, checkpoints.

**One run over several calls.** ``steps`` counts from the run's first step, so
``fit(steps=100)`` then ``fit(steps=200)`` takes the same 200 steps as one
``fit(steps=200)`` (with the same generator object: the run draws from it only when it
starts, for the blocks and the initial entries). The run's identity (data, settings,
the generator's initial state, the rates) is written into each checkpoint; a later
call resumes from the file into the same iterates as an uninterrupted run and refuses a
file of another run, naming what differs.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..._core.statefile import identity_mismatch, load_state, save_state, tensor_digest
from ..._core.validation import check_bool, check_int, check_positive_int, check_positive_number

if TYPE_CHECKING:
    from .model import CaGP

__all__ = ["CaGPTraining", "train"]

_DIGESTS = {
    "data": "the training inputs or targets differ",
    "generator": "the fit generator's initial state differs: another seed?",
}


@dataclass(frozen=True)
class CaGPTraining:
    """A CaGP model's training run after its last ``fit`` call (replaced, never modified).

    Attributes
    ----------
    identity
        What makes calls one run: data digest, settings, the generator's initial state,
        the rates.
    steps_done
        Adam steps since the run's first.
    history
        Per step: ``{"step", "elbo", "seconds"}`` (the ELBO before the step's update).
    adam
        The optimiser's state.
    """

    identity: dict[str, object]
    steps_done: int
    history: tuple[dict[str, float], ...]
    adam: dict[str, Any]


def _settings(q: CaGP) -> str:
    actions = q.actions if isinstance(q.actions, str) else type(q.actions).__name__
    return repr((type(q).__name__, type(q.kernel).__name__, q.num_actions, actions, q.blocks,
                 q.backend, q.mean))  # fmt: skip


def _leaves(q: CaGP, learn_hyperparameters: bool) -> tuple[list[dict], list[torch.Tensor]]:
    """Adam's parameter groups (hyperparameters, actions) and the tensors that move."""
    hyper = q.hyperparameter_leaves() if learn_hyperparameters else []
    variational = q.variational_leaves()
    groups: list[dict[str, Any]] = []
    if hyper:
        groups.append({"params": hyper, "name": "hyperparameters"})
    if variational:
        groups.append({"params": variational, "name": "actions"})
    return groups, [*hyper, *variational]


def train(
    q: CaGP,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    lr: float,
    action_lr: float,
    generator: torch.Generator,
    learn_hyperparameters: bool,
    progress: bool,
    checkpoint: str | Path | None,
    checkpoint_every: int,
) -> None:
    """Run Adam on ``−ELBO / n`` until ``steps`` (counted over calls); see the module doc."""
    steps = check_int(steps, "steps", minimum=0)
    lr = check_positive_number(lr, "lr")
    action_lr = check_positive_number(action_lr, "action_lr")
    learn_hyperparameters = check_bool(learn_hyperparameters, "learn_hyperparameters")
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    q.place(X)
    data = tensor_digest(X, y)
    state: CaGPTraining | None = q.training
    if state is not None and state.identity["data"] != data:
        warnings.warn(
            "CaGP.fit on other data than the run's: a new run starts (new actions)",
            stacklevel=4,
        )
        state = None
    if state is None:
        identity = {
            "data": data, "settings": _settings(q),
            "generator": tensor_digest(generator.get_state()), "lr": float(lr),
            "action_lr": float(action_lr), "learn_hyperparameters": learn_hyperparameters,
        }  # fmt: skip
        q.initialise_actions(X, y, generator)
    else:
        identity = {**state.identity, "lr": float(lr), "action_lr": float(action_lr),
                    "learn_hyperparameters": learn_hyperparameters}  # fmt: skip
    path = None if checkpoint is None else Path(checkpoint)
    groups, leaves = _leaves(q, learn_hyperparameters)
    adam = torch.optim.Adam(
        [{**g, "lr": lr if g["name"] == "hyperparameters" else action_lr} for g in groups]
    ) if groups else None  # fmt: skip
    done, history = 0, []
    if state is not None:
        done, history = state.steps_done, list(state.history)
        if adam is not None and state.adam:
            adam.load_state_dict(state.adam)
            _set_rates(adam, lr, action_lr)
    if path is not None and path.exists():
        done, history = _load(q, path, identity, adam)
    if done >= steps:
        if steps > 0 and state is not None:
            warnings.warn(
                f"CaGP.fit: the run has taken {done} steps and steps={steps} counts from its "
                f"first step, so this call trains nothing (ask for steps > {done} to continue)",
                stacklevel=4,
            )
        q.training = CaGPTraining(identity, done, tuple(history), _adam_state(adam))
        return
    assert adam is not None or not leaves
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, initial=done, desc="CaGP", unit="step")
    flags = [p.requires_grad for p in leaves]
    n = X.shape[0]
    try:
        for p in leaves:
            p.requires_grad_(True)
        while done < steps:
            t0 = time.perf_counter()
            elbo = q.training_objective(X, y)
            value = float(elbo.detach())
            if not torch.isfinite(elbo):
                raise FloatingPointError(
                    f"CaGP.fit: the ELBO is {value} at step {done + 1} (lr={lr:g}, "
                    f"action_lr={action_lr:g}): lower the rates and fit a new model"
                )
            if adam is not None:
                adam.zero_grad(set_to_none=True)
                (-elbo / n).backward()
                adam.step()
            done += 1
            history.append({"step": done, "elbo": value, "seconds": time.perf_counter() - t0})
            if bar is not None:
                bar.update(1)
                bar.set_postfix(elbo=f"{value:.4g}", refresh=False)
            if path is not None and (done % checkpoint_every == 0 or done == steps):
                q.training = CaGPTraining(identity, done, tuple(history), _adam_state(adam))
                _save(q, path)
    finally:
        if bar is not None:
            bar.close()
        for p, flag in zip(leaves, flags, strict=True):
            p.requires_grad_(flag)
            p.grad = None
        q.training = CaGPTraining(identity, done, tuple(history), _adam_state(adam))


def _set_rates(adam: torch.optim.Optimizer, lr: float, action_lr: float) -> None:
    for group in adam.param_groups:
        group["lr"] = lr if group.get("name") == "hyperparameters" else action_lr


def _adam_state(adam: torch.optim.Optimizer | None) -> dict[str, Any]:
    if adam is None:
        return {}
    import copy

    return copy.deepcopy(adam.state_dict())


def _save(q: CaGP, path: Path) -> None:
    assert q.training is not None
    payload = {
        "identity": q.training.identity,
        "steps_done": q.training.steps_done,
        "history": list(q.training.history),
        "adam": q.training.adam,
        "kernel": q.kernel.state_dict(),
        "tensors": {name: t.detach() for name, t in q.state_tensors().items()},
        "block_of": None if q.pattern is None else q.pattern.block_of,
    }
    save_state(path, "cagp", "cagp-run", payload)


def _load(
    q: CaGP, path: Path, identity: dict[str, object], adam: torch.optim.Optimizer | None
) -> tuple[int, list[dict[str, float]]]:
    state = load_state(path, "cagp", "cagp-run")
    mismatch = identity_mismatch(state["identity"], identity, _DIGESTS)
    if mismatch is not None:
        raise ValueError(
            f"checkpoint {str(path)!r} belongs to another run: {mismatch}; delete it or "
            "choose another checkpoint file"
        )
    with torch.no_grad():
        q.kernel.load_state_dict(state["kernel"])
        for name, tensor in q.state_tensors().items():
            tensor.copy_(state["tensors"][name])
    if state["block_of"] is not None and q.pattern is not None:
        q.pattern = replace(q.pattern, block_of=state["block_of"].to(q.pattern.block_of.device))
    if adam is not None and state["adam"]:
        adam.load_state_dict(state["adam"])
    return int(state["steps_done"]), list(state["history"])
