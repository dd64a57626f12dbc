"""Run every benchmark and write one Markdown report (``make bench``).

Each ``benchmarks/<name>.py`` script prints Markdown tables of ratios measured in
the same run against scikit-learn and other references. This driver runs them one
after the other (they time themselves; running them in parallel would distort the
timings), keeps going when one fails, and writes ``benchmarks/results/report.md``
(ignored by git) with the machine, the versions and every script's output.

``python benchmarks/run_all.py [--quick] [--only NAME ...]``: ``--quick`` passes
``--quick`` to every script (minutes instead of about an hour).
"""

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = sorted(
    p.stem
    for p in HERE.glob("*.py")
    if p.stem != "run_all" and not p.stem.startswith("_")
)


def _versions():
    import numpy
    import scipy
    import sklearn

    import skdpsco

    return (
        f"python {platform.python_version()}, numpy {numpy.__version__}, "
        f"scipy {scipy.__version__}, scikit-learn {sklearn.__version__}, "
        f"skdpsco {skdpsco.__version__}"
    )


def run_script(name, quick):
    cmd = [sys.executable, str(HERE / f"{name}.py")] + (["--quick"] if quick else [])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--only", nargs="+", choices=SCRIPTS, help="scripts to run")
    parser.add_argument(
        "--output", default=str(HERE / "results" / "report.md"), help="report path"
    )
    args = parser.parse_args(argv)
    names = args.only or SCRIPTS
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    parts = [
        "# skdpsco benchmark report\n",
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}; {platform.machine()}, "
        f"{os.cpu_count()} CPUs; {_versions()}; "
        f"{'quick sizes' if args.quick else 'full sizes'}.\n",
    ]
    failed = []
    for name in names:
        print(f"[run_all] {name} ...", flush=True)
        code, stdout, stderr, seconds = run_script(name, args.quick)
        print(f"[run_all] {name}: exit {code} after {seconds:.0f} s", flush=True)
        parts.append(f"\n# `{name}.py` ({seconds:.0f} s)\n\n{stdout}")
        if code != 0:
            failed.append(name)
            tail = "\n".join(stderr.strip().splitlines()[-20:])
            parts.append(f"\n**Failed with exit code {code}:**\n\n```\n{tail}\n```\n")
    out.write_text("\n".join(parts))
    print(f"[run_all] report written to {out}")
    if failed:
        print(f"[run_all] failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
