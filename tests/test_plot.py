"""fp4kit.plot: optional matplotlib, Figures returned, a clear message without matplotlib."""
from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import fp4kit

X = np.random.default_rng(1).standard_t(3, size=(64, 128)).astype(np.float32)


def test_import_fp4kit_does_not_import_matplotlib():
    code = "import sys, fp4kit, fp4kit.plot, fp4kit.analysis; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("call", ["histogram", "heatmap", "comparison"])
def test_without_matplotlib_says_how_to_install(monkeypatch, call):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)        # import matplotlib -> ImportError
    from fp4kit import plot
    q = fp4kit.quantize(X, "nvfp4")
    fn = {"histogram": lambda: plot.plot_histogram(X, "nvfp4"), "heatmap": lambda: plot.plot_scale_heatmap(q),
          "comparison": lambda: plot.plot_format_comparison(X, formats=["nvfp4"], recipes={})}[call]
    with pytest.raises(ImportError, match=r'pip install "fp4kit\[plot\]"'):
        fn()


def _mpl():
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure
    return Figure


@pytest.mark.parametrize("fmt", list(fp4kit.FORMATS))
def test_histogram_and_heatmap(fmt, tmp_path):
    Figure = _mpl()
    from fp4kit.plot import plot_histogram, plot_scale_heatmap
    q = fp4kit.quantize(X, fmt, axis="both", scale_layout="swizzled")
    for op in ("rowwise", "columnwise"):
        fig = plot_histogram(X, q, operand=op)
        assert isinstance(fig, Figure)
        fig2 = plot_scale_heatmap(q, operand=op)
        assert isinstance(fig2, Figure)
    fig.savefig(tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 1000
    assert isinstance(plot_histogram(X, fmt, operand="columnwise"), Figure)     # quantizes by itself


def test_heatmap_reduces_large_matrices():
    Figure = _mpl()
    from fp4kit.plot import plot_scale_heatmap
    x = np.random.default_rng(0).standard_normal((1100, 64)).astype(np.float32)
    assert isinstance(plot_scale_heatmap(fp4kit.quantize(x, "nvfp4"), max_cells=256), Figure)


def test_format_comparison():
    Figure = _mpl()
    from fp4kit.plot import DEFAULT_RECIPES, format_comparison, plot_format_comparison
    reps = format_comparison(X, recipes=DEFAULT_RECIPES)
    assert list(reps) == list(fp4kit.FORMATS) + list(DEFAULT_RECIPES)
    assert reps["mxfp8_e4m3"]["rowwise"].snr_db > reps["nvfp4"]["rowwise"].snr_db > reps["mxfp4_e2m1"]["rowwise"].snr_db
    assert reps["nvfp4 rht"]["columnwise"].reference.startswith("rht16")
    fig = plot_format_comparison(X.astype(ml_dtypes.bfloat16), metric="mse")
    assert isinstance(fig, Figure)


def test_format_comparison_defaults_fit_the_shape_and_named_ones_raise():
    """33 rows: no RHT (needs 16 | M) and no columnwise FP4 (needs an even M). The defaults leave
    those out with a warning that says why; a format or recipe the caller names raises."""
    from fp4kit.plot import DEFAULT_RECIPES, format_comparison
    x = X[:33]
    with pytest.warns(UserWarning, match=r"left out .*mxfp4_e2m1 \(.*M must be even.*nvfp4 rht \(.*multiple of 16"):
        reps = format_comparison(x)
    assert list(reps) == [f for f, spec in fp4kit.FORMATS.items() if not spec.packed]
    assert not set(reps) & set(DEFAULT_RECIPES)            # every default recipe is NVFP4, both operands
    assert reps["mxfp8_e4m3"]["columnwise"].shape == (128, 33)
    with pytest.raises(ValueError, match="M must be even"):
        format_comparison(x, formats=["mxfp4_e2m1"], recipes={})
    with pytest.raises(ValueError, match="rht=True needs M"):
        format_comparison(x, formats=[], recipes={"mine": {"rht": True}})


def test_plot_format_comparison_refuses_an_unknown_metric_before_any_work(monkeypatch):
    from fp4kit import plot
    monkeypatch.setattr(plot, "format_comparison", lambda *a, **k: pytest.fail("quantized first"))
    with pytest.raises(ValueError, match=r"metric: expected one of 'snr_db', .* got 'snr'"):
        plot.plot_format_comparison(X, metric="snr")
