"""scripts/bench_compare.py (no GPU): reading bench.py's tables, matching rows, flagging changes, and
the wiring into scripts/bench.py (--compare) and scripts/gpu_check.sh."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "bench_compare.py"


@pytest.fixture(scope="module")
def bc(script):
    return script("bench_compare")


@pytest.fixture(scope="module")
def bench(script):
    return script("bench")


def _row(bench, op="quantize", fmt="nvfp4", axis="both", layout="swizzled", variant="supplied amax",
         shape="8192x8192", us=100.0, speedup=None):
    return bench._fmt_row(dict(op=op, format=fmt, axis=axis, layout=layout, variant=variant, shape=shape, us=us,
                               bytes=201326592, gbs=1000.0, copy_pct=75.0, eager_us=None, speedup=speedup,
                               baseline_exact=""))


def _table(bench, rows, device="NVIDIA H100 80GB HBM3"):
    return "\n".join([f"# fp4kit benchmarks on {device}", "", bench.HEADER] + rows) + "\n"


def test_the_table_of_record_parses(bc):
    """docs/bench-h100.md: every op row read (the table has well over a hundred), no key twice, the
    device from its title; the small-input table after it and the prose are not rows."""
    t = bc.parse_table((ROOT / "docs" / "bench-h100.md").read_text())
    assert t.device == "NVIDIA H100 80GB HBM3"
    assert len(t.rows) > 100 and t.duplicates == 0
    assert all(len(k) == 6 and r.us > 0 for k, r in t.rows.items())
    assert ("quantize", "mxfp8_e4m3", "rowwise", "compact", "", "8192x8192") in t.rows
    assert not any(k[0].isdigit() for k in t.rows)          # "| 1 | torch bfloat16 | ..." is not an op row


def test_the_h200_table_parses(bc):
    """docs/bench-h200.md (since the forty-seventh session a table with the "bytes" column, merged
    from four runs) reads without duplicates or skipped rows."""
    t = bc.parse_table((ROOT / "docs" / "bench-h200.md").read_text())
    assert t.device == "NVIDIA H200" and len(t.rows) > 150 and t.duplicates == 0 and t.skipped == 0
    assert all(r.us > 0 for r in t.rows.values())
    assert ("group_dequantize->float32 G=8", "nvfp4", "rowwise", "swizzled",
            "device dims, skewed, 1 empty, M_i % 128 == 0", "65536x7168") in t.rows


def test_tables_with_and_without_the_bytes_column(bc, bench):
    """bench.py's header has a "bytes" column after the device time; tables from before it (the
    published ones) have none. Each table's cells are read by its own header, and the two compare."""
    assert bc.COLUMNS == tuple(c.strip() for c in bench.HEADER.splitlines()[0].strip("|").split("|"))
    assert "bytes" in bc.COLUMNS and "bytes" not in bc.COLUMNS_NO_BYTES
    old_header = ("| " + " | ".join(bc.COLUMNS_NO_BYTES) + " |\n" + "|---" * len(bc.COLUMNS_NO_BYTES) + "|")
    old = bc.parse_table("\n".join(["# fp4kit benchmarks on NVIDIA H100 80GB HBM3", "", old_header,
                                    "| quantize | nvfp4 | both | swizzled | supplied amax | 8192x8192 | 101.8 | 1977 | "
                                    "75% | 128.0 | 2.50x | torch.compile (bytes exact vs reference: yes) |"]))
    new = bc.parse_table(_table(bench, [_row(bench, us=99.0, speedup=2.6)]))
    key = ("quantize", "nvfp4", "both", "swizzled", "supplied amax", "8192x8192")
    assert old.rows[key] == bc.Row(key, 101.8, 75.0, 2.5)
    assert new.rows[key] == bc.Row(key, 99.0, 75.0, 2.6)               # not the bytes cell
    assert "| 99.0 | 201326592 | 1000 | 75% |" in _row(bench, us=99.0)
    [c] = bc.compare(new, old)
    assert (c.ref_us, c.new_us, c.flag) == (101.8, 99.0, "")
    # a new-style row under an old header (or the reverse) has the wrong number of cells: skipped
    mixed = bc.parse_table("\n".join([old_header, _row(bench)]))
    assert not mixed.rows and mixed.skipped == 1


def test_bench_rows_round_trip(bc, bench):
    """What bench.py prints is what bench_compare reads: the key columns, the time, the speed-up."""
    text = _table(bench, [_row(bench, us=123.4, speedup=4.5), _row(bench, fmt="mxfp4_e2m1", variant="", us=88.0)])
    t = bc.parse_table(text)
    r = t.rows[("quantize", "nvfp4", "both", "swizzled", "supplied amax", "8192x8192")]
    assert (r.us, r.speedup, r.copy_pct) == (123.4, 4.5, 75.0)
    assert t.rows[("quantize", "mxfp4_e2m1", "both", "swizzled", "", "8192x8192")].speedup is None


def test_compare_flags_by_threshold(bc, bench):
    ref = bc.parse_table(_table(bench, [_row(bench, shape=f"{n}x8192", us=100.0) for n in (1, 2, 3, 4)]))
    new = bc.parse_table(_table(bench, [_row(bench, shape="1x8192", us=103.5), _row(bench, shape="2x8192", us=102.0),
                                        _row(bench, shape="3x8192", us=90.0), _row(bench, shape="5x8192", us=1.0)]))
    ch = bc.compare(new, ref, threshold=3.0)
    assert [(c.key[5], round(c.delta_pct, 6), c.flag) for c in ch] == [
        ("1x8192", 3.5, "slower"), ("2x8192", 2.0, ""), ("3x8192", -10.0, "faster")]
    s = bc.summary(ch, new, ref, 3.0, "ref.md")
    assert s.startswith("bench vs ref.md: 3 of 4 rows matched; 1 slower by more than 3% (worst +3.5%")
    assert "1 faster (best -10.0%" in s and "1 without a reference row" in s
    assert "different GPUs" not in s and "[" not in s
    assert [c.flag for c in bc.compare(new, ref, threshold=5.0)] == ["", "", "faster"]
    with pytest.raises(ValueError, match="threshold"):
        bc.compare(new, ref, threshold=-1)


def test_different_gpus_are_named(bc, bench):
    ref = bc.parse_table(_table(bench, [_row(bench)]))
    new = bc.parse_table(_table(bench, [_row(bench, us=90.0)], device="NVIDIA H200"))
    s = bc.summary(bc.compare(new, ref), new, ref, 3.0, "docs/bench-h100.md")
    assert s.endswith("[different GPUs: NVIDIA H200 against NVIDIA H100 80GB HBM3]")


def test_duplicate_keys_keep_the_first(bc, bench):
    t = bc.parse_table(_table(bench, [_row(bench, us=1.0), _row(bench, us=2.0)]))
    assert t.duplicates == 1 and next(iter(t.rows.values())).us == 1.0


def test_cli(bc, bench, tmp_path):
    ref = tmp_path / "ref.md"
    new = tmp_path / "new.md"
    out = tmp_path / "cmp.md"
    ref.write_text(_table(bench, [_row(bench, us=100.0), _row(bench, shape="1x1", us=10.0)]))
    new.write_text(_table(bench, [_row(bench, us=110.0), _row(bench, shape="1x1", us=10.1)]))
    run = lambda *a: subprocess.run([sys.executable, str(SCRIPT), *map(str, a)], capture_output=True,  # noqa: E731
                                    text=True)
    p = run(new, "--ref", ref, "--out", out, "--brief")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert lines[-1].startswith(f"bench vs {ref}: 2 of 2 rows matched; 1 slower")   # a path outside the repo: as given
    assert sum("**slower**" in ln for ln in lines) == 1 and not any("1x1" in ln for ln in lines)   # brief
    assert "1x1" in out.read_text() and out.read_text().strip().splitlines()[-1] == lines[-1]
    empty = tmp_path / "empty.md"
    empty.write_text("no table here\n")
    p = run(empty, "--ref", ref)
    assert p.returncode == 2 and "holds no scripts/bench.py row" in p.stderr
    p = run(new, "--ref", tmp_path / "missing.md")
    assert p.returncode == 2 and "cannot read" in p.stderr
    p = run(new, "--ref", ref, "--threshold", "-2")
    assert p.returncode == 2 and "--threshold" in p.stderr


def test_bench_and_gpu_check_wiring(bench, capsys):
    """bench.py --compare refuses a missing file and --cpu a CPU outside the process's affinity, before
    any GPU work; gpu_check.sh compares with the table of record and prints the summary line."""
    with pytest.raises(SystemExit):
        bench.main(["--compare", "no/such/table.md"])
    assert "--compare: cannot read 'no/such/table.md'" in capsys.readouterr().err
    with pytest.raises(SystemExit):                     # a file that is no bench table
        bench.main(["--compare", str(ROOT / "README.md")])
    assert "holds no scripts/bench.py row" in capsys.readouterr().err
    with pytest.raises(SystemExit):                     # --cpu: a CPU this process may not run on
        bench.main(["--cpu", "100000"])
    assert "--cpu: CPU 100000 is not one this process may run on (" in capsys.readouterr().err
    sh = (ROOT / "scripts" / "gpu_check.sh").read_text()
    assert "--compare docs/bench-h100.md" in sh and "'^bench vs '" in sh


def test_edges(bc, bench):
    """Exactly the threshold is not "more than" it; a reference time of 0 and malformed lines are not
    compared but counted; nothing in common says so instead of reading like a pass; repeated rows of
    the new table are named."""
    ref = bc.parse_table(_table(bench, [_row(bench, shape="1x1", us=10.0), _row(bench, shape="2x2", us=0.0),
                                        "| quantize | nvfp4 | both | a | b | c | x | 1 | 1% | - | - | - |",
                                        "| too | few | cells |"]))
    assert ref.skipped == 2 and len(ref.rows) == 2
    new = bc.parse_table(_table(bench, [_row(bench, shape="1x1", us=10.3), _row(bench, shape="2x2", us=5.0),
                                        _row(bench, shape="1x1", us=99.0)]))
    ch = bc.compare(new, ref, 3.0)
    assert [(c.key[5], c.delta_pct, c.flag) for c in ch] == [("1x1", 3.0, "")]
    s = bc.summary(ch, new, ref, 3.0, "ref.md")
    assert "1 of 2 rows matched; none slower" in s and "[1 repeated rows of the new table ignored]" in s
    assert "[2 malformed table lines skipped]" in s
    other = bc.parse_table(_table(bench, [_row(bench, shape="9x9")]))
    s = bc.summary(bc.compare(other, ref), other, ref, 3.0, "ref.md")
    assert s.startswith("bench vs ref.md: nothing compared, none of the 1 rows is in the reference")
    untitled = bc.parse_table("\n".join([bench.HEADER, _row(bench, shape="1x1")]))
    assert "[a table without its GPU in the title]" in bc.summary(bc.compare(untitled, ref), untitled, ref, 3.0, "r")
    with pytest.raises(ValueError, match="threshold"):
        bc.compare(new, ref, threshold=float("nan"))


def test_out_into_a_new_folder(bc, bench, tmp_path, capsys):
    ref = tmp_path / "ref.md"
    ref.write_text(_table(bench, [_row(bench)]))
    out = tmp_path / "a" / "b" / "cmp.md"
    assert bc.main([str(ref), "--ref", str(ref), "--out", str(out), "--brief"]) == 0
    assert out.read_text().strip().splitlines()[-1] == capsys.readouterr().out.strip().splitlines()[-1]
