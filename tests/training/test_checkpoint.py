"""Checkpoints: the identity covers all that changes the result; damaged files are refused."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
import torch

from pnsolve.gp.training import (
    TrainingCheckpoint,
    TrainingConfig,
    load_checkpoint,
    save_checkpoint,
    train_hyperparameters,
)

F64 = torch.float64
CONFIG = TrainingConfig(solver="cg", estimator="pathwise", steps=2, num_probes=2, num_features=16)


def _data(n=40):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 2, generator=g, dtype=F64)
    return X, torch.sin(4 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)


def _train(ckpt: Path, seed: int = 1, config: TrainingConfig = CONFIG, **kw):
    X, y = _data()
    gen = torch.Generator().manual_seed(seed)
    return train_hyperparameters(X, y, config, generator=gen, checkpoint=ckpt, **kw)


def test_resume_with_another_generator_seed_is_refused(tmp_path: Path):
    # before: the seed-1 checkpoint was silently reused and returned the seed-1 result
    ckpt = tmp_path / "run.pt"
    _train(ckpt, seed=1)
    with pytest.raises(ValueError, match=r"differs in: generator \(initial state differs"):
        _train(ckpt, seed=2)
    assert len(_train(ckpt, seed=1).log) == 2  # the same seed resumes


def test_identity_holds_every_config_field_data_generator_and_run_info(tmp_path: Path):
    ckpt = tmp_path / "run.pt"
    _train(ckpt, run_info={"seed": 1, "source": "toy.csv"})
    identity = load_checkpoint(ckpt)["identity"]
    fields = {f.name for f in dataclasses.fields(TrainingConfig)}
    assert fields | {"data", "generator", "seed", "source"} == set(identity)
    with pytest.raises(ValueError, match=r"seed \(checkpoint: 1, this run: 2\)"):
        _train(ckpt, run_info={"seed": 2, "source": "toy.csv"})


@pytest.mark.parametrize("field", ["tol_probes", "momentum", "min_noise", "max_step_residual"])
def test_a_change_in_any_config_field_is_refused_naming_it(tmp_path: Path, field):
    ckpt = tmp_path / "run.pt"
    _train(ckpt)
    other = dataclasses.replace(CONFIG, **{field: 0.5})
    with pytest.raises(ValueError, match=rf"differs in: {field} \(checkpoint: "):
        _train(ckpt, config=other)


def test_run_info_values_must_be_plain(tmp_path: Path):
    with pytest.raises(TypeError, match=r"run_info\['x'\]"):
        _train(tmp_path / "run.pt", run_info={"x": [1]})
    with pytest.raises(ValueError, match="run_info key 'steps'"):
        _train(tmp_path / "run.pt", run_info={"steps": 3})


def _flip_a_value(raw: bytes, old: torch.Tensor) -> bytes:
    """Change the first byte of ``old``'s serialised storage: a plausible silent corruption."""
    needle = old.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    at = raw.index(needle)
    return raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1 :]


def test_corrupted_value_is_refused_naming_the_file(tmp_path: Path):
    # before: a flipped bit in a stored tensor loaded fine and changed the resumed result
    ckpt = tmp_path / "run.pt"
    _train(ckpt)
    solutions = load_checkpoint(ckpt)["solutions"]
    ckpt.write_bytes(_flip_a_value(ckpt.read_bytes(), solutions))
    with pytest.raises(ValueError, match=r"run\.pt' is corrupt or truncated \(checksum"):
        _train(ckpt)


def test_truncated_file_is_refused_naming_the_file(tmp_path: Path):
    ckpt = tmp_path / "run.pt"
    _train(ckpt)
    raw = ckpt.read_bytes()
    ckpt.write_bytes(raw[: len(raw) - 100])
    with pytest.raises(ValueError, match=r"run\.pt' is corrupt or truncated"):
        load_checkpoint(ckpt)
    ckpt.write_bytes(raw[:10])
    with pytest.raises(ValueError, match=r"run\.pt' is not a pnsolve training checkpoint"):
        load_checkpoint(ckpt)


def test_other_files_and_formats_are_refused(tmp_path: Path):
    plain = tmp_path / "plain.pt"
    buffer = io.BytesIO()
    torch.save({"format": 1, "log": []}, buffer)  # an earlier pnsolve's checkpoint
    plain.write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match=r"plain\.pt' is not a pnsolve .*older pnsolve format"):
        load_checkpoint(plain)
    future = tmp_path / "future.pt"
    future.write_bytes(b"pnsolve-checkpoint 9 " + b"0" * 64 + b"\nxyz")
    with pytest.raises(ValueError, match="format 9"):
        load_checkpoint(future)
    with pytest.raises(ValueError, match="not readable"):
        load_checkpoint(tmp_path)  # a folder


def test_on_resume_reports_the_restored_steps(tmp_path: Path):
    ckpt = tmp_path / "run.pt"
    seen: list[int] = []
    _train(ckpt, on_resume=seen.append)
    assert seen == []  # nothing restored on a fresh run
    _train(ckpt, on_resume=seen.append)
    assert seen == [2]


def test_the_checkpoint_is_a_typed_record_readable_as_before(tmp_path: Path):
    ckpt = tmp_path / "run.pt"
    result = _train(ckpt)
    saved = load_checkpoint(ckpt)
    assert isinstance(saved, TrainingCheckpoint)
    assert saved.log == result.log and saved["log"] == result.log  # mapping-style too
    assert torch.equal(saved.solutions, result.solutions.cpu())  # checkpoints load on the CPU
    assert saved["identity"] is saved.identity
    with pytest.raises(KeyError):
        saved["format"]


def test_the_file_format_is_unchanged(tmp_path: Path):
    """Format 2: the same bytes whether saved from the record or from the plain dict the
    earlier loop saved (the field order of the record is the file's key order)."""
    ckpt = tmp_path / "run.pt"
    _train(ckpt)
    saved = load_checkpoint(ckpt)
    from_record, from_dict = tmp_path / "a.pt", tmp_path / "b.pt"
    save_checkpoint(from_record, saved)
    save_checkpoint(from_dict, {k: saved[k] for k in TrainingCheckpoint.__dataclass_fields__})
    raw = from_record.read_bytes()
    assert raw == from_dict.read_bytes()
    assert raw.startswith(b"pnsolve-checkpoint 2 ")
    body = raw.partition(b"\n")[2]
    payload = torch.load(io.BytesIO(body), weights_only=True)
    assert list(payload) == [
        "identity", "model", "optimizer", "estimator", "generator", "log", "solutions", "format"
    ]  # fmt: skip
    assert payload["format"] == 2 and isinstance(payload["log"][0], dict)


def test_digest_cache_sees_other_data_and_in_place_changes():
    """``DigestCache``: the cached digest only for the same unmodified tensors."""
    from pnsolve._core.statefile import DigestCache, tensor_digest

    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(30, 2, generator=g), torch.randn(30, generator=g)
    cache = DigestCache()
    first = cache(X, y)
    assert first == tensor_digest(X, y) == cache(X, y)
    assert cache(X.clone(), y.clone()) == first  # equal content, other objects
    assert cache(X, y.flip(0)) != first  # the order of rows matters
    assert cache(X, y) == first  # cached again for these very tensors
    y.add_(1.0)  # an in-place change of the tensors just cached
    assert cache(X, y) == tensor_digest(X, y) != first
