#!/usr/bin/env python3
"""Compare a benchmark table from scripts/bench.py with a reference one (by default the table of
record, docs/bench-h100.md): which rows got slower or faster, by how much.

    python3 scripts/bench_compare.py NEW.md [--ref docs/bench-h100.md] [--threshold 3] [--out FILE]

Rows are matched by (op, format, axis, scales, variant, shape); each matched row gets the change of
its device time and of its speed-up over its baseline. A row is flagged when its device time moved
by more than --threshold percent. The last line is a one-line summary (scripts/gpu_check.sh prints
it in its own summary). Exit status 0 whatever the times (the lent machines vary by a few percent
between hosts: a flag is a prompt to rerun on one machine, not a verdict); 2 when a file holds no
benchmark row. Times from different GPUs are compared too, with a warning in the summary.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REF = ROOT / "docs" / "bench-h100.md"

# scripts/bench.py's HEADER columns; the first six name a row. Tables written before bench.py had a
# "bytes" column (docs/bench-h100.md, docs/bench-h200.md) have COLUMNS_NO_BYTES; both are read, the
# cells found by their header.
COLUMNS = ("op", "format", "axis", "scales", "variant", "shape", "us (device)", "bytes", "GB/s", "copy %",
           "us (eager, host incl.)", "speed-up vs baseline", "baseline")
COLUMNS_NO_BYTES = tuple(c for c in COLUMNS if c != "bytes")
HEADERS = (COLUMNS, COLUMNS_NO_BYTES)
KEY_COLUMNS = 6


class Row(NamedTuple):
    key: tuple          # (op, format, axis, scales, variant, shape)
    us: float           # device time
    copy_pct: float | None
    speedup: float | None


class Table(NamedTuple):
    device: str | None  # from the "# fp4kit benchmarks on <device>" title, when there is one
    rows: dict          # key -> Row, the first row of each key in file order
    duplicates: int     # rows whose key came earlier in the file (ignored)
    skipped: int = 0    # lines of a bench table that are not a row of it (wrong cell count, no time)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _number(text: str, suffix: str = "") -> float | None:
    t = text.strip()
    if suffix and t.endswith(suffix):
        t = t[: -len(suffix)]
    try:
        return float(t)
    except ValueError:
        return None


def parse_table(text: str) -> Table:
    """The op rows of every table in `text` whose header is bench.py's (other tables, prose and
    malformed lines are skipped)."""
    device = None
    rows: dict = {}
    dups = skipped = 0
    in_table = False
    cols = COLUMNS
    for line in text.splitlines():
        s = line.strip()
        if device is None and s.startswith("# fp4kit benchmarks on "):
            device = s[len("# fp4kit benchmarks on "):].split(" (")[0].strip() or None
        if not s.startswith("|"):
            in_table = False
            continue
        cells = _cells(s)
        if tuple(cells) in HEADERS:
            in_table, cols = True, tuple(cells)
            continue
        if not in_table or set(s) <= set("|-: "):
            continue
        us = _number(cells[cols.index("us (device)")]) if len(cells) == len(cols) else None
        if us is None:
            skipped += 1
            continue
        key = tuple(cells[:KEY_COLUMNS])
        if key in rows:
            dups += 1
            continue
        rows[key] = Row(key, us, _number(cells[cols.index("copy %")], "%"),
                        _number(cells[cols.index("speed-up vs baseline")], "x"))
    return Table(device, rows, dups, skipped)


class Change(NamedTuple):
    key: tuple
    ref_us: float
    new_us: float
    delta_pct: float            # (new - ref) / ref, percent: positive is slower
    ref_speedup: float | None
    new_speedup: float | None
    flag: str                   # "slower", "faster" or ""


def compare(new: Table, ref: Table, threshold: float = 3.0) -> list[Change]:
    """One Change per key present in both tables, in the new table's order."""
    if not threshold >= 0:
        raise ValueError(f"threshold: expected a percentage >= 0, got {threshold}")
    out = []
    for key, n in new.rows.items():
        r = ref.rows.get(key)
        if r is None or r.us <= 0:
            continue
        d = round(100.0 * (n.us - r.us) / r.us, 6)     # 10.0 -> 10.3 us is +3 %, not +3.0000000000000027 %
        flag = "slower" if d > threshold else ("faster" if d < -threshold else "")
        out.append(Change(key, r.us, n.us, d, r.speedup, n.speedup, flag))
    return out


def _name(key: tuple) -> str:
    op, fmt, axis, scales, variant, shape = key
    parts = [op] + [p for p in (fmt, axis, scales) if p and p != "-"] + [shape]
    return " ".join(parts) + (f" ({variant})" if variant else "")


def _sp(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def report(changes: list[Change], new: Table, ref: Table, threshold: float, ref_name: str) -> list[str]:
    """A markdown table of the matched rows (flagged rows marked) and the summary line, last."""
    lines = [f"| row | {ref_name} us | new us | change | speed-up before -> now | |", "|---|---|---|---|---|---|"]
    for c in changes:
        mark = {"slower": "**slower**", "faster": "faster"}.get(c.flag, "")
        lines.append(f"| {_name(c.key)} | {c.ref_us:.1f} | {c.new_us:.1f} | {c.delta_pct:+.1f}% | "
                     f"{_sp(c.ref_speedup)} -> {_sp(c.new_speedup)} | {mark} |")
    lines += ["", summary(changes, new, ref, threshold, ref_name)]
    return lines


def summary(changes: list[Change], new: Table, ref: Table, threshold: float, ref_name: str) -> str:
    if not changes:
        text = (f"bench vs {ref_name}: nothing compared, none of the {len(new.rows)} rows is in the reference "
                "(other shapes, formats or variants)")
    else:
        slower = [c for c in changes if c.flag == "slower"]
        faster = [c for c in changes if c.flag == "faster"]
        parts = [f"{len(changes)} of {len(new.rows)} rows matched"]
        if slower:
            w = max(slower, key=lambda c: c.delta_pct)
            parts.append(f"{len(slower)} slower by more than {threshold:g}% (worst {w.delta_pct:+.1f}%: {_name(w.key)})")
        else:
            parts.append(f"none slower by more than {threshold:g}%")
        if faster:
            b = min(faster, key=lambda c: c.delta_pct)
            parts.append(f"{len(faster)} faster (best {b.delta_pct:+.1f}%: {_name(b.key)})")
        unmatched = len(new.rows) - len(changes)
        if unmatched:
            parts.append(f"{unmatched} without a reference row")
        parts.append(f"median change {statistics.median(c.delta_pct for c in changes) + 0.0:+.1f}%")
        text = f"bench vs {ref_name}: " + "; ".join(parts)
    notes = []
    if new.duplicates:
        notes.append(f"{new.duplicates} repeated rows of the new table ignored")
    if new.skipped or ref.skipped:
        notes.append(f"{new.skipped + ref.skipped} malformed table lines skipped")
    if new.device and ref.device and new.device != ref.device:
        notes.append(f"different GPUs: {new.device} against {ref.device}")
    elif not (new.device and ref.device):
        notes.append("a table without its GPU in the title")
    return text + "".join(f" [{n}]" for n in notes)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new", help="a bench.md written by scripts/bench.py")
    ap.add_argument("--ref", default=str(DEFAULT_REF), help="the reference table (default: docs/bench-h100.md)")
    ap.add_argument("--threshold", type=float, default=3.0, help="flag rows whose device time moved by more "
                    "than this many percent (default 3)")
    ap.add_argument("--out", default=None, help="also write the report to this file")
    ap.add_argument("--brief", action="store_true", help="print only the flagged rows and the summary "
                    "(--out still gets the whole report)")
    args = ap.parse_args(argv)
    if not args.threshold >= 0:
        ap.error(f"--threshold: expected a percentage >= 0, got {args.threshold}")
    tables = {}
    for which in ("new", "ref"):
        path = Path(getattr(args, which))
        try:
            text = path.read_text()
        except OSError as e:
            ap.error(f"{which}: cannot read {path}: {e.strerror or e}")
        t = parse_table(text)
        if not t.rows:
            print(f"bench_compare: {path} holds no scripts/bench.py row", file=sys.stderr)
            return 2
        tables[which] = t
    ref_path = Path(args.ref).resolve()
    ref_name = str(ref_path.relative_to(ROOT)) if ref_path.is_relative_to(ROOT) else str(Path(args.ref))
    changes = compare(tables["new"], tables["ref"], args.threshold)
    lines = report(changes, tables["new"], tables["ref"], args.threshold, ref_name)
    if args.brief:
        flagged = [ln for ln, c in zip(lines[2:], changes) if c.flag]
        print("\n".join(lines[:2] + flagged + lines[-2:] if flagged else lines[-1:]))
    else:
        print("\n".join(lines))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
