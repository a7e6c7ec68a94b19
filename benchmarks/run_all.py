"""Run a set of benchmark scripts, each in its own process, and time them.

Usage: ``python benchmarks/run_all.py [--studies | --all] [--fresh] [--quick] [...]``.

- no flag (``make bench``): the ratio benchmarks, quick side-by-side speed and accuracy
  ratios: 36.1 minutes on the 2-core CPU machine (the latest of three runs on 2026-11-29:
  46.5, 41.5, 36.1; per script below);
- ``--studies`` (``make bench-studies``): the long, table-producing studies, about
  7 hours. Each saves its finished units in ``outputs/bench-studies/<script>.jsonl``
  (``_common.ResultStore``), so an interrupted run continues where it stopped;
  ``--fresh`` recomputes everything;
- ``--all``: both sets.

Other arguments (``--quick``) go to every script; ``--fresh`` only to the studies. A
table of each script's wall time and exit status ends the run.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

#: Side-by-side ratios, ``make bench`` (minutes on the 2-core CPU machine, measured in one
#: run on 2026-11-29 after pn.cg's host-decided iterations: 36.1 in all; 41.5 and 46.5
#: the runs before).
RATIOS = [
    "bench_cg.py",  # 2.1
    "bench_kernel_matrix.py",  # 0.7
    "bench_kernel_algebra.py",  # fused k1 + k2, chunked and keops: 9.5-13.6 (--quick: 2)
    "bench_distributed.py",  # backend="distributed", 1 → 2 processes: 1.6
    "bench_pls.py",  # 2.2
    # precision="mixed" against float64 CG, dense n = 10⁴ and chunked n = 2·10⁴: 3.8
    "bench_mixed_precision.py",
    "bench_ulisse.py",  # 0.1
    "bench_itergp.py",  # with the n = 10⁵ chunked and KeOps runs: 3.8
    "bench_love.py",  # 3.6
    "bench_ski_love.py",  # Pleiss et al. (2018), SKI + LOVE: 6.7 (--quick: 1)
    # Evans & Nair (2020): flat cost per step, Fig. 1: 0.6 (--quick: 1)
    "bench_qsgp_cost.py",
    "bench_gpu.py",  # the GPU numbers (make gpu-check); on a CPU a dry run: 1.4
]

#: Long studies, ``make bench-studies``: resumable (``--fresh`` starts over).
STUDIES = [
    # Filippone & Engler (2015) §3-4 (Figs. 1-4): about 5 minutes (--quick: 30 s)
    "bench_ulisse_seed.py",
    # Pleiss et al. (2018) Table 2 at CPU scale: about 10 minutes (--quick: 1)
    "bench_love_tables.py",
    "bench_iterncgp.py",  # Tatzel et al. (2024): about 9 minutes (--quick: 1)
    "bench_training.py",  # Lin et al. (2024) Table 1, early stopping: about 40 minutes
    "bench_calibration.py",  # the calibration study: about 40 minutes (--quick: 2)
    # Filippone & Engler (2015) §5.1, SGLD vs MH: about 45 minutes (--quick: 3)
    "bench_sgld_mh.py",
    # the default ChainConfig against MH on a set it was not tuned on: 5 minutes (--quick: 1)
    "bench_sgld_defaults.py",
    # Filippone & Engler (2015) §5.2, matrix-free chains: about 35 minutes (--quick: 1)
    "bench_sgld_large.py",
    # QSGP's defaults from good hyperparameters on 7 UCI sets: 10 minutes (--quick: 1)
    "bench_qsgp_defaults.py",
    # Evans & Nair (2020) Table 2 + digits: about 2.5 hours (--quick: 1 minute)
    "bench_qsgp_uci.py",
    # Wenger et al. (2024), CaGP against SVGP, SGPR, exact GP, IterGP: 35 minutes (--quick: 1)
    "bench_cagp.py",
    # CaGP's blocks, random against k-means, on 3 UCI sets: 15 minutes (--quick: 1)
    "bench_cagp_blocks.py",
    # CaGP's default rates, chosen on 4 UCI sets outside the table: 20 minutes (--quick: 1)
    "bench_cagp_rates.py",
]

#: Every script of both sets (the order of ``--all``).
SCRIPTS = RATIOS + STUDIES

#: Options only the studies understand.
STUDY_OPTIONS = ("--fresh",)


def select(argv: list[str]) -> tuple[list[str], list[str]]:
    """The scripts that ``argv`` asks for, and the arguments left for them."""
    rest = [a for a in argv if a not in ("--studies", "--all")]
    if "--all" in argv:
        return SCRIPTS, rest
    return (STUDIES if "--studies" in argv else RATIOS), rest


def main(argv: list[str] | None = None) -> int:
    """Run the selected scripts one after another; the first non-zero exit status."""
    here = Path(__file__).resolve().parent
    scripts, extra = select(sys.argv[1:] if argv is None else argv)
    status = 0
    timings: list[tuple[str, float, int]] = []
    for name in scripts:
        args = extra if name in STUDIES else [a for a in extra if a not in STUDY_OPTIONS]
        print(f"\n######## {name} ########", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(here / name), *args])
        timings.append((name, time.perf_counter() - t0, rc))
        status = status or rc
    width = max(len(name) for name, _, _ in timings)
    print(f"\n== wall time per script ==\n{'script':<{width}}  {'minutes':>8}  exit")
    for name, seconds, rc in timings:
        print(f"{name:<{width}}  {seconds / 60:8.1f}  {rc}")
    total = sum(seconds for _, seconds, _ in timings)
    print(f"{'total':<{width}}  {total / 60:8.1f}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
