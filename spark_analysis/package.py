"""Build the zip shipped to a cluster's executors with `spark-submit --py-files`: the pure
Python packages the executors import (`kraftlab.checker`, `kraftlab.spark_analysis`, under an
otherwise empty `kraftlab` package) and the exit codes the driver program returns (`kraftlab.exits`),
nothing else.

    python -m kraftlab.spark_analysis.package dist/kraftlab-spark.zip
"""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path

from kraftlab.spark_analysis.session import PROJECT_ROOT

PACKAGES = ("checker", "spark_analysis")
MODULES = ("kraftlab/exits.py",)


def build_zip(out: str | Path, root: Path = PROJECT_ROOT) -> Path:
    """Write the zip (sources only, sorted, fixed timestamps: the same tree gives the same bytes)."""
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        files = [("kraftlab/__init__.py", b'"""kraftlab\'s checker, as shipped to Spark executors."""\n')]
        for pkg in PACKAGES:
            files += [(f"kraftlab/{path.relative_to(root).as_posix()}", path.read_bytes())
                      for path in sorted((root / pkg).rglob("*.py"))]
        files += [(name, (root / name).read_bytes()) for name in MODULES]
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return target


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kraftlab.spark_analysis.package", description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, nargs="?", default=Path("dist/kraftlab-spark.zip"))
    print(build_zip(p.parse_args(argv).out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
