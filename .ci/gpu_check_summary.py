"""Summarise a device check (``.ci/gpu-check``) into ``OUT/gpu_check.md`` and print it.

Usage: ``python .ci/gpu_check_summary.py OUT DEVICE QUICK SUITE_RC BENCH_RC SECONDS``.
Reads ``OUT/junit.xml`` (test counts and failures), ``OUT/pytest.log`` (the device line
of pnsolve's conftest) and ``OUT/bench_gpu.md`` (the benchmark's tables).
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def _suite(out: Path) -> tuple[list[str], list[str]]:
    rows: list[str] = []
    failures: list[str] = []
    junit = out / "junit.xml"
    if junit.exists():
        root = ET.parse(junit).getroot()
        suites = [root] if root.tag == "testsuite" else list(root)
        keys = ("tests", "failures", "errors", "skipped")
        counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}
        seconds = sum(float(s.get("time", 0.0)) for s in suites)
        passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
        budget = sum(
            1
            for case in root.iter("testcase")
            for skip in case.findall("skipped")
            if "time budget" in (skip.get("message") or "")
        )
        rows.append(
            f"| tests | {passed} passed, {counts['failures']} failed, {counts['errors']} errors, "
            f"{counts['skipped']} skipped ({budget} of them for the time budget) in "
            f"{seconds:.0f} s |"
        )
        for case in root.iter("testcase"):
            for bad in list(case.findall("failure")) + list(case.findall("error")):
                message = (bad.get("message") or "").strip().splitlines()
                first = message[0][:160] if message else ""
                failures.append(f"- `{case.get('classname')}::{case.get('name')}`: {first}")
    else:
        rows.append("| tests | no junit.xml (the suite was killed: see pytest.log) |")
    log = out / "pytest.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    device_line = re.findall(r"^device .*tests ran on .*$", text, flags=re.M)
    rows.append(f"| on the device | {device_line[-1] if device_line else 'no device line'} |")
    final = re.findall(r"^=*\s*(\d+ (?:passed|failed).*)$", text, flags=re.M)
    if final:
        rows.append(f"| pytest summary | {final[-1].strip('= ')} |")
    return rows, failures


def main() -> int:
    """Write and print the summary; always 0 (the check's own exit code says pass/fail)."""
    out, device, quick, suite_rc, bench_rc, seconds = sys.argv[1:7]
    out_dir = Path(out)
    rows, failures = _suite(out_dir)
    lines = [
        f"# pnsolve device check ({'QUICK' if quick == '1' else 'full'}, --device {device})",
        "",
        "| | |",
        "|---|---|",
        f"| wall time | {seconds} s |",
        f"| suite rc / benchmark rc | {suite_rc} / {bench_rc} |",
        *rows,
        "",
    ]
    if failures:
        lines += [f"## Failures ({len(failures)})", "", *failures[:60], ""]
        if len(failures) > 60:
            lines.append(f"... and {len(failures) - 60} more (junit.xml)")
    bench = out_dir / "bench_gpu.md"
    lines += ["## Benchmark", "", bench.read_text() if bench.exists() else "(no bench_gpu.md)"]
    text = "\n".join(lines) + "\n"
    (out_dir / "gpu_check.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
