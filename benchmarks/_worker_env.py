"""Libraries that cannot share the project's environment are benchmarked in one of their own.

``run_worker("NAME", ...)`` runs ``benchmarks/_NAME_worker.py`` with the Python of ``benchmarks/.venv-NAME``,
created on first use from ``benchmarks/requirements-NAME.txt`` (pinned), and returns what it printed.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_worker(name: str, args: Sequence[str] = (), stdin: str | None = None) -> str:
    env = HERE / f".venv-{name}"
    python = env / "bin" / "python"
    if not python.exists():
        subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(env)], check=True)
        requirements = HERE / f"requirements-{name}.txt"
        subprocess.run(
            ["uv", "pip", "install", "-q", "--python", str(python), "-r", str(requirements)], check=True
        )
    out = subprocess.run(
        [str(python), str(HERE / f"_{name}_worker.py"), *args],
        input=stdin,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout
