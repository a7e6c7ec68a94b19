"""Render the calibration study's JSON (``bench_calibration.py --json``) as Markdown tables.

Usage: ``python benchmarks/calibration_markdown.py outputs/bench/calibration.json``; the
tables of ``docs/calibration.md`` are this script's output.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

ADAPTIVE = ("CG", "CG, residual-rescaled", "UnitVector(pivot)")


def _cell(c: dict, part: str) -> str:
    if part == "comp" and c["excluded"] >= 1.0:
        return "—"
    return f"{c[f'{part}_mean_z2']:.3g} ± {c[f'{part}_mean_z2_se']:.1g} ({c[f'{part}_cov95']:.3f})"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def render(data: dict) -> str:
    """Markdown: targets, per-problem calibration and error tables, time ratios."""
    by = defaultdict(dict)
    for c in data["cells"]:
        by[(c["problem"], c["method"])][c["budget"]] = c
    problems = list(dict.fromkeys(c["problem"] for c in data["cells"]))
    methods = list(dict.fromkeys(c["method"] for c in data["cells"]))
    budgets = sorted({c["budget"] for c in data["cells"]})
    out = []

    # targets: calibrated options over every cell
    rows = []
    for m in methods:
        z2, cov, draws = [], [], set()
        for p in problems:
            for c in by[(p, m)].values():
                for part in ("comp", "comb"):
                    if part == "comp" and c["excluded"] >= 1.0:
                        continue
                    z2.append(c[f"{part}_mean_z2"])
                    cov.append(c[f"{part}_cov95"])
                    draws.add(c[f"{part}_draws"])
        worst_z = max(abs(v - 1) for v in z2)
        worst_c = max(abs(v - 0.95) for v in cov)
        ok = "yes" if worst_z <= 0.1 and worst_c <= 0.01 else "no"
        kind = "adaptive" if m in ADAPTIVE else "non-adaptive"
        rows.append(
            [m, kind, f"{min(z2):.3g} … {max(z2):.3g}", f"{worst_z:.3f}", f"{worst_c:.3f}", ok]
        )
    out.append(
        _table(
            [
                "method",
                "actions",
                "E[z²] range",
                "largest deviation of E[z²] from 1",
                "largest deviation of coverage from 0.95",
                "targets met",
            ],
            rows,
        )
    )

    # per problem: computational calibration, then error ratios
    for p in problems:
        out.append(f"\n#### {p}: computational variance, E[z²] ± SE (95 % coverage)\n")
        rows = [[m, *[_cell(by[(p, m)][i], "comp") for i in budgets]] for m in methods]
        out.append(_table(["method", *[f"i = {i}" for i in budgets]], rows))
        out.append(f"\n#### {p}: combined variance, E[z²] ± SE (95 % coverage)\n")
        rows = [[m, *[_cell(by[(p, m)][i], "comb") for i in budgets]] for m in methods]
        out.append(_table(["method", *[f"i = {i}" for i in budgets]], rows))
        out.append(f"\n#### {p}: posterior-mean error ÷ CG's at the same budget (products)\n")
        cg = by[(p, "CG")]
        rows = []
        for m in methods:
            if m == "CG, residual-rescaled":
                continue
            cells = by[(p, m)]
            rows.append(
                [
                    m,
                    *[
                        f"{cells[i]['error'] / cg[i]['error']:.3g} ({cells[i]['products']})"
                        for i in budgets
                    ],
                ]
            )
        rows.append(["CG's relative error", *[f"{cg[i]['error']:.2e}" for i in budgets]])
        out.append(_table(["method", *[f"i = {i}" for i in budgets]], rows))

    # best calibrated option per problem and budget
    out.append("\n#### Best calibrated option: its error ÷ CG's\n")
    rows = []
    for p in problems:
        row = [p]
        for i in budgets:
            cands = [m for m in methods if m not in ADAPTIVE]
            best = min(cands, key=lambda m: by[(p, m)][i]["error"])
            row.append(f"{best}: {by[(p, best)][i]['error'] / by[(p, 'CG')][i]['error']:.3g}")
        rows.append(row)
    out.append(_table(["problem", *[f"i = {i}" for i in budgets]], rows))

    times = data.get("times", {})
    if times:
        out.append("\n#### Time of fit + posterior variance at 50 products ÷ CG's\n")
        labels = list(next(iter(times.values())))
        rows = [[m, *[f"{times[p][m]:.2f}" for p in times]] for m in labels]
        out.append(_table(["method", *times], rows))
    return "\n".join(out) + "\n"


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "outputs/bench/calibration.json")
    print(render(json.loads(path.read_text())))


if __name__ == "__main__":
    main()
