"""``--backend distributed``: the process group of a ``torchrun`` launch, around one command."""

from __future__ import annotations

import contextlib
import datetime
import io
import os
from collections.abc import Iterator

__all__ = ["TORCHRUN_VARIABLES", "distributed_session"]

#: Environment variables torchrun sets for every rank (``env://`` initialisation).
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@contextlib.contextmanager
def distributed_session(backend: str, timeout: float, command: str = "fit") -> Iterator[bool]:
    """Yield whether this process leads (prints, writes files); start/stop the group.

    For ``backend != "distributed"`` nothing happens (this process leads). Otherwise
    the default process group is initialised from torchrun's environment (gloo: the
    command's tensors live on the CPU) with ``timeout`` seconds for every collective,
    standard output is silenced on ranks > 0, and the group is destroyed on exit.

    Raises
    ------
    UsageError
        If the torchrun environment is missing (the message shows the launch line of
        ``command``, with the ``--`` that keeps torchrun from taking the command's
        options, e.g. ``--log``, for abbreviations of its own).
    """
    if backend != "distributed":
        yield True
        return
    import torch.distributed as dist

    from .main import UsageError

    missing = [v for v in TORCHRUN_VARIABLES if v not in os.environ]
    if missing and not dist.is_initialized():
        raise UsageError(
            "--backend distributed runs under torchrun, e.g. torchrun --nproc_per_node=2 "
            f"-m pnsolve -- {command} ... --backend distributed ({', '.join(missing)} not set)"
        )
    owned = not dist.is_initialized()
    if owned:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    lead = dist.get_rank() == 0
    try:
        if lead:
            yield True
        else:
            with contextlib.redirect_stdout(io.StringIO()):
                yield False
    finally:
        if owned:
            dist.destroy_process_group()
