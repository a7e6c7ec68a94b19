"""Run every benchmark script in its own process and print their ratio tables.

Usage: ``python benchmarks/run_all.py [--quick]`` (what ``make bench`` runs).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPTS = [
    "bench_cg.py",
    "bench_kernel_matrix.py",
    "bench_kernel_algebra.py",  # fused k1 + k2, chunked and keops: about 10 minutes (--quick: 2)
    "bench_distributed.py",  # backend="distributed", 1 → 2 processes: about 1.5 minutes
    "bench_pls.py",
    "bench_ulisse.py",
    # Filippone & Engler (2015) §3-4 (Figs. 1-4): about 5 minutes (--quick: 30 s)
    "bench_ulisse_seed.py",
    "bench_itergp.py",
    "bench_love.py",
    "bench_ski_love.py",  # Pleiss et al. (2018), SKI + LOVE: about 8 minutes (--quick: 1)
    # Pleiss et al. (2018) Table 2 at CPU scale: about 10 minutes (--quick: 1)
    "bench_love_tables.py",
    "bench_iterncgp.py",
    "bench_training.py",
    "bench_calibration.py",  # the calibration study: about 40 minutes (--quick: 2)
    # Filippone & Engler (2015) §5.1, SGLD vs MH: about 45 minutes (--quick: 3)
    "bench_sgld_mh.py",
    # the default ChainConfig against MH on a set it was not tuned on: 5 minutes (--quick: 1)
    "bench_sgld_defaults.py",
    # Filippone & Engler (2015) §5.2, matrix-free chains: about 35 minutes (--quick: 1)
    "bench_sgld_large.py",
    # QSGP's defaults from good hyperparameters on 7 UCI sets: 10 minutes (--quick: 1)
    "bench_qsgp_defaults.py",
    "bench_qsgp_cost.py",  # Evans & Nair (2020): flat cost per step, Fig. 1 (--quick: 1 minute)
    # Evans & Nair (2020) Table 2 + digits: about 2.5 hours (--quick: 1 minute)
    "bench_qsgp_uci.py",
    # Wenger et al. (2024), CaGP against SVGP, SGPR, exact GP, IterGP: 35 minutes (--quick: 1)
    "bench_cagp.py",
    # CaGP's blocks, random against k-means, on 3 UCI sets: 15 minutes (--quick: 1)
    "bench_cagp_blocks.py",
    # CaGP's default rates, chosen on 4 UCI sets outside the table: 20 minutes (--quick: 1)
    "bench_cagp_rates.py",
    "bench_gpu.py",  # the GPU numbers (make gpu-check); on a CPU a dry run: about 1.5 minutes
]


def main() -> int:
    here = Path(__file__).resolve().parent
    extra = sys.argv[1:]
    status = 0
    for name in SCRIPTS:
        print(f"\n######## {name} ########", flush=True)
        rc = subprocess.call([sys.executable, str(here / name), *extra])
        status = status or rc
    return status


if __name__ == "__main__":
    sys.exit(main())
