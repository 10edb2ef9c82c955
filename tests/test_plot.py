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


def _no_quantize(monkeypatch):
    monkeypatch.setattr(fp4kit.api, "quantize", lambda *a, **k: pytest.fail("quantized before the checks"))


def test_histogram_checks_x_against_q_and_refuses_options():
    from fp4kit.plot import plot_histogram
    q = fp4kit.quantize(X, "nvfp4", axis="both")
    for x in (X.T.copy(), X[:3]):                   # what error_report says of a mismatched x
        with pytest.raises(ValueError, match=r"^x: expected the shape \(64, 128\) that q was quantized from"):
            plot_histogram(x, q)
    with pytest.raises(TypeError, match=r"^axsi: quantize options go with a format name only"):
        plot_histogram(X, q, axsi="both")


@pytest.mark.parametrize("bins, err", [(0, ValueError), (-3, ValueError), ("50", TypeError), (2.5, TypeError),
                                       (True, TypeError)])
def test_histogram_checks_bins_and_operand_first(monkeypatch, bins, err):
    from fp4kit.plot import plot_histogram
    _no_quantize(monkeypatch)
    with pytest.raises(err, match=r"^bins: expected an integer >= 1, got "):
        plot_histogram(X, "nvfp4", bins=bins)
    with pytest.raises(ValueError, match=r"^operand: expected one of \['rowwise', 'columnwise'\], got 'rows'"):
        plot_histogram(X, "nvfp4", operand="rows")


def test_histogram_names_fmt_or_q():
    from fp4kit.plot import plot_histogram
    g = fp4kit.group_quantize(X, "nvfp4", first_dims=[32, 0, 32])
    with pytest.raises(TypeError, match=r"^fmt_or_q: expected a format name or a QuantizedTensor, .*g\[i\]"):
        plot_histogram(X, g)
    with pytest.raises(TypeError, match=r"^fmt_or_q: expected a format name or a QuantizedTensor, got Operand"):
        plot_histogram(X, fp4kit.quantize(X, "nvfp4").rowwise)


def test_histogram_title_agrees_with_error_report():
    """Saturated / zeroed fractions as error_report counts them: from the codes, over finite inputs,
    zeroed over non-zero inputs (a ReLU output's zeros are no loss), stochastic rounding included."""
    _mpl()
    from fp4kit.plot import plot_histogram
    relu = np.maximum(X, 0)
    bad = X.copy()
    bad[0, 0], bad[1, 1] = np.inf, np.nan
    for x, opts in ((relu, {}), (X, {"rounding": "stochastic", "seed": 3}), (bad, {})):
        q = fp4kit.quantize(x, "nvfp4", **opts)
        o = fp4kit.error_report(x, q)["rowwise"]
        title = plot_histogram(x, q, bins=np.int64(50)).axes[0].get_title()
        assert f"{100 * o.saturated:.1f}% at the max code" in title
        assert f"{100 * o.zeroed:.1f}% of non-zero inputs round to 0" in title
    assert f"{o.lost} finite inputs decode to non-finite values" in title         # NVFP4, global amax inf


@pytest.mark.parametrize("max_cells, err", [(0, ValueError), (-1, ValueError), (2.5, TypeError), ("8", TypeError)])
def test_heatmap_checks_max_cells(max_cells, err):
    from fp4kit.plot import plot_scale_heatmap
    with pytest.raises(err, match=r"^max_cells: expected an integer >= 1, got "):
        plot_scale_heatmap(fp4kit.quantize(X, "nvfp4"), max_cells=max_cells)


def test_heatmap_of_an_empty_operand_says_no_blocks():
    _mpl()
    import warnings
    from fp4kit.plot import plot_scale_heatmap
    g = fp4kit.group_quantize(X, "nvfp4", first_dims=[32, 0, 32])
    for q, op in ((fp4kit.quantize(np.zeros((0, 64), np.float32), "nvfp4", axis="both"), "rowwise"),
                  (fp4kit.quantize(np.zeros((16, 0), np.float32), "nvfp4", axis="both"), "columnwise"),
                  (g[1], "rowwise")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fig = plot_scale_heatmap(q, operand=op, max_cells=np.int32(8))
        assert [t.get_text() for t in fig.axes[0].texts] == ["no blocks"]


def test_format_comparison_takes_one_format_and_labels_formats_by_name():
    from fp4kit.plot import format_comparison
    assert list(format_comparison(X, formats="nvfp4", recipes={})) == ["nvfp4"]
    assert list(format_comparison(X, formats=fp4kit.FORMATS["nvfp4"], recipes={})) == ["nvfp4"]
    assert list(format_comparison(X, formats=[fp4kit.FORMATS["mxfp8_e4m3"]], recipes={"l": ["nvfp4", {}]})) == \
        ["mxfp8_e4m3", "l"]


@pytest.mark.parametrize("recipes, err, match", [
    ([("a", {})], TypeError, r"^recipes: expected a mapping"),
    ({"a": ("nvfp4", {}, 1)}, TypeError, r"^recipes\['a'\]: expected a dict of quantize options or a \(format"),
    ({"a": None}, TypeError, r"^recipes\['a'\]: expected a dict"),
    ({"a": ("nvfp9", {})}, ValueError, r"^recipes\['a'\]: expected one of"),
    ({"a": {"fmt": "nvfp4"}}, TypeError, r"^recipes\['a'\]: 'fmt' is not an option of quantize"),
    ({"a": {"bogus": 1}}, TypeError, r"^recipes\['a'\]: 'bogus' is not an option of quantize"),
    ({"a": {"rounding": "up"}}, ValueError, r"^recipes\['a'\]: rounding: expected one of"),
    ({"a": ("mxfp8_e4m3", {"rht": True})}, ValueError, r"^recipes\['a'\]: rht: is an NVFP4 option"),
    ({"nvfp4": {"tile_2d": True}}, ValueError, r"^recipes\['nvfp4'\]: the label 'nvfp4' is taken"),
])
def test_format_comparison_checks_every_recipe_before_quantizing(monkeypatch, recipes, err, match):
    from fp4kit.plot import format_comparison
    _no_quantize(monkeypatch)
    with pytest.raises(err, match=match):
        format_comparison(X, formats=["mxfp8_e4m3", "nvfp4"], recipes=recipes)


def test_format_comparison_checks_x_and_reraises_when_no_default_fits(monkeypatch):
    from fp4kit.plot import format_comparison
    with pytest.raises(ValueError, match=r"^x: expected an array with ndim >= 1, got a 0-d array"):
        format_comparison(np.ones((), np.float32))
    with pytest.raises(ValueError, match=r"rht=True needs M .* a multiple of 16"):     # 33 rows: no NVFP4 recipe fits
        format_comparison(X[:33], formats=[])
    monkeypatch.setattr(fp4kit.api, "quantize", lambda *a, **k: (_ for _ in ()).throw(ValueError("boom")))
    with pytest.raises(ValueError, match="boom"):                                      # not a shape limit: raised
        format_comparison(X, recipes={})


class _FakeCupy:
    """A float32 CuPy-like array (no GPU here): only its library and dtype matter before quantize."""
    __module__ = "cupy"

    def __init__(self, a):
        self.a, self.shape, self.dtype = a, a.shape, a.dtype


def test_format_comparison_rht_of_an_array_without_bfloat16(monkeypatch):
    from fp4kit import plot
    x = _FakeCupy(X)
    _no_quantize(monkeypatch)
    with pytest.raises(TypeError, match=r"^recipes\['a'\]: x: rht=True needs bfloat16 input, .*CuPy has no bfloat16"):
        plot.format_comparison(x, formats=[], recipes={"a": {"rht": True}})
    monkeypatch.setattr(fp4kit.api, "quantize", lambda xi, fmt, **o: (fmt, o))
    monkeypatch.setattr(plot, "error_report", lambda xi, q: q)
    with pytest.warns(UserWarning, match=r"left out .*nvfp4 rht \(x: rht=True needs bfloat16 input"):
        reps = plot.format_comparison(x, formats=[])
    assert list(reps) == [k for k in plot.DEFAULT_RECIPES if k != "nvfp4 rht"]


def test_plot_format_comparison_missing_operand_and_exact_results():
    _mpl()
    from fp4kit.plot import plot_format_comparison
    fig = plot_format_comparison(X, formats=["nvfp4"], recipes={"a": {"axis": "rowwise"}})
    assert [t.get_text() for t in fig.axes[0].texts][-1] == "-"                  # a's columnwise: no bar
    exact = (np.arange(64 * 64).reshape(64, 64) % 7).astype(np.float32)            # exact in MXFP8, not NVFP4
    ax = plot_format_comparison(exact, formats=["mxfp8_e4m3", "nvfp4"], recipes={}).axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts[0] == texts[2] == "exact"
    bars = ax.patches[:4]
    assert bars[0].get_height() > bars[1].get_height() > 0 and bars[0].get_hatch() == "//"
    with pytest.raises(TypeError, match=r"^metric: expected one of 'snr_db', .* got list"):
        plot_format_comparison(X, metric=["snr_db"])
