# SPDX-License-Identifier: BSD-3-Clause
"""The rate-distortion chart (docs/bench.md, "Chart"): python3 -m gradcodec.plot and bench --plot
draw a real matplotlib figure — an SVG whose text holds every row's name, a PNG of the expected
size — written whole or not at all; bad paths and reports are refused with one error line."""

import json
import os
import struct
import subprocess
import sys

import pytest

import gradcodec
from gradcodec.plot import plot, row_name
from conftest import SNAPSHOTS, cli, load_npz


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A bench report of the bundled snapshot: three presets and one sweep of three values."""
    out = tmp_path_factory.mktemp("plot") / "bench.json"
    cli("bench", SNAPSHOTS / "step_000.npz", "--preset", "fp16", "--preset", "qsgd4", "--preset", "topk-1pct",
        "--sweep", "topk.ratio=0.001,0.01,0.1", "--repeat", 1, "--min-time", 0, "--json", out, "--quiet")
    return json.loads(out.read_text())


def test_svg_holds_every_row_and_a_line_per_sweep(tmp_path, report):
    path = tmp_path / "chart.svg"
    plot(report, path)
    svg = path.read_text()
    assert svg.startswith("<?xml") and "<svg" in svg and 20_000 < len(svg) < 2_000_000
    names = [row_name(r) for r in report["rows"]]
    assert names == ["fp16", "qsgd4", "topk-1pct [topk.ratio=0.001]", "topk-1pct [topk.ratio=0.01]",
                     "topk-1pct [topk.ratio=0.1]"]
    for name in names:
        assert svg.count(f">{name}<") == 2, name  # a label in each panel
    assert "bits per parameter (log scale)" in svg and "relative L2 error" in svg
    assert not list(tmp_path.glob(".gradcodec-plot-*"))  # no temporary file left


def test_png_and_the_same_report_gives_the_same_svg(tmp_path, report):
    png = tmp_path / "chart.png"
    plot(report["rows"], png)
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    assert (width, height) == (1300, 550)
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    plot(report, a)
    plot(report, b)
    assert a.read_bytes() == b.read_bytes()


def test_the_module_and_the_cli_draw_it(tmp_path, report):
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(report))
    out = tmp_path / "m.svg"
    subprocess.run([sys.executable, "-m", "gradcodec.plot", str(src), "-o", str(out)], check=True, timeout=300)
    assert ">qsgd4<" in out.read_text()
    chart = tmp_path / "cli.svg"
    cli("bench", SNAPSHOTS / "step_000.npz", "--preset", "bird+", "--preset", "lossless", "--repeat", 1,
        "--min-time", 0, "--plot", chart, "--quiet")
    text = chart.read_text()
    assert ">bird+<" in text and ">lossless<" in text
    # An existing chart is kept without --force; a wrong extension is refused before any work.
    p = cli("bench", SNAPSHOTS / "step_000.npz", "--preset", "fp16", "--plot", chart, check=False)
    assert p.returncode == 1 and "already exists" in p.stderr
    p = cli("bench", SNAPSHOTS / "step_000.npz", "--preset", "fp16", "--plot", tmp_path / "c.jpg", check=False)
    assert p.returncode == 1 and ".svg, .png or .pdf" in p.stderr and not (tmp_path / "c.jpg").exists()


def test_bad_reports_and_paths_are_refused(tmp_path, report):
    with pytest.raises(gradcodec.UsageError):
        plot(report, tmp_path / "chart.gif")
    with pytest.raises(gradcodec.InputError):
        plot([], tmp_path / "chart.svg")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": 1}')
    p = subprocess.run([sys.executable, "-m", "gradcodec.plot", str(bad), "-o", str(tmp_path / "x.svg")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stderr.startswith("gradcodec: error: ") and "not a gradcodec bench report" in p.stderr
    assert not (tmp_path / "x.svg").exists()
