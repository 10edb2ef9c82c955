#!/usr/bin/env python
"""Regenerate the PNGs in docs/img/ (fp4kit.plot on a heavy-tailed, outlier-channel activation).

Usage: python scripts/make_doc_plots.py   (needs matplotlib: pip install ".[plot]")
"""
from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np

import fp4kit
from fp4kit.plot import plot_format_comparison, plot_histogram, plot_scale_heatmap

OUT = Path(__file__).resolve().parents[1] / "docs" / "img"


def activations(m=256, k=512, seed=0):
    """Student-t (3 dof) activations with a few outlier channels, as bfloat16."""
    rng = np.random.default_rng(seed)
    x = rng.standard_t(3, size=(m, k)).astype(np.float32)
    x[:, rng.choice(k, 6, replace=False)] *= 30.0
    return x.astype(ml_dtypes.bfloat16)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    x = activations()
    figs = {
        "histogram_nvfp4.png": plot_histogram(x, "nvfp4"),
        "scale_heatmap_mxfp8.png": plot_scale_heatmap(fp4kit.quantize(x, "mxfp8_e4m3", axis="columnwise"), "columnwise"),
        "format_comparison.png": plot_format_comparison(x),
    }
    for name, fig in figs.items():
        fig.savefig(OUT / name, dpi=80)
        print(OUT / name)


if __name__ == "__main__":
    main()
