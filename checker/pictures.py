"""How the checker writes its pictures: each figure as PNG (the report shows it) and SVG beside it
(sharp when zoomed), its folder made, the figure closed (matplotlib keeps every open figure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_picture(fig: Any, out_base: str | Path, dpi: int = 110, tight: bool = False) -> list[Path]:
    """`out_base`.png and `out_base`.svg (any suffix of `out_base` replaced); returns both paths, PNG first."""
    import matplotlib.pyplot as plt

    base = Path(out_base)
    base.parent.mkdir(parents=True, exist_ok=True)
    paths = [base.with_suffix(".png"), base.with_suffix(".svg")]
    for p in paths:
        fig.savefig(p, dpi=dpi, bbox_inches="tight" if tight else None)
    plt.close(fig)
    return paths
