# SPDX-License-Identifier: BSD-3-Clause
"""The rate-distortion chart of a bench report (docs/bench.md, "Chart"), drawn with matplotlib.

    python3 -m gradcodec.plot bench.json -o chart.svg      # or .png, .pdf
    gradcodec bench ... --plot chart.svg                    # the same, from the CLI

Left panel: relative L2 error (log scale, linear near 0, when it spans more than two decades)
against bits per parameter (log scale); right panel: cosine
similarity against bits per parameter. One labelled point per row; the rows of one --sweep
(the same preset or pipeline, several values) are joined by a line in the order of their bits.
The file is written under a temporary name and renamed into place."""

import argparse
import json
import os
import sys
import tempfile

from ._errors import InputError, UsageError

FORMATS = (".svg", ".png", ".pdf")


def row_name(row):
    """A row's name as the bench table gives it: the preset, or the pipeline text, and its sweep."""
    name = row["pipeline"] if row["label"] == "pipeline" else row["label"]
    return f"{name} [{row['sweep']}]" if row.get("sweep") else name


def _sweep_keys(row):
    return tuple(part.split("=")[0] for part in row["sweep"].split(", ")) if row.get("sweep") else ()


def _series(rows):
    """The rows as series: the consecutive rows of one --sweep (same label, same swept
    parameters, as bench lists them) together, every other row alone."""
    series = []
    for row in rows:
        last = series[-1][-1] if series else None
        if last is not None and _sweep_keys(row) and _sweep_keys(row) == _sweep_keys(last) \
                and row["label"] == last["label"]:
            series[-1].append(row)
        else:
            series.append([row])
    return series


def plot(report, path, *, title=None):
    """Draws the chart of `report` (a bench report dict, or its list of rows) to `path`."""
    rows = report["rows"] if isinstance(report, dict) else list(report)
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise UsageError(f"{path}: the chart is written as {', '.join(FORMATS)} (by its extension)")
    usable = [r for r in rows if r.get("bits_per_param") and r.get("rel_l2") is not None]
    if not usable:
        raise InputError("the report has no row with bits per parameter and an error to draw")
    try:
        import matplotlib
    except ImportError:
        raise InputError("drawing the chart needs matplotlib (Debian: python3-matplotlib)") from None
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # labels stay text in an SVG
    matplotlib.rcParams["svg.hashsalt"] = "gradcodec"  # the same report gives the same file
    import matplotlib.pyplot as plt

    fig, (ax_err, ax_cos) = plt.subplots(1, 2, figsize=(13, 5.5), constrained_layout=True)
    for group in _series(usable):
        group = sorted(group, key=lambda r: r["bits_per_param"])
        xs = [r["bits_per_param"] for r in group]
        for ax, field in ((ax_err, "rel_l2"), (ax_cos, "cosine")):
            ys = [r[field] for r in group]
            style = "o-" if len(group) > 1 else "o"
            (line,) = ax.plot(xs, ys, style, markersize=5)
            for r, x, y in zip(group, xs, ys):
                ax.annotate(row_name(r), (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7,
                            color=line.get_color())
    errors = [r["rel_l2"] for r in usable if r["rel_l2"] > 0]
    if errors and max(errors) / min(errors) > 100:
        # Errors over several decades (a sign method's 80 next to fp16's 0.0002): a log scale,
        # linear near 0 so that exact rows (rel L2 0) stay on the chart.
        ax_err.set_yscale("symlog", linthresh=min(errors))
    for ax, label in ((ax_err, "relative L2 error  ||g - g^|| / ||g||"), (ax_cos, "cosine(g, g^)")):
        ax.set_xscale("log")
        ax.set_xlabel("bits per parameter (log scale)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    if title:
        fig.suptitle(title)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".gradcodec-plot-", suffix=ext, dir=directory)
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)  # an ordinary new file's mode, not mkstemp's 0600
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format=ext[1:], metadata={"Date": None} if ext == ".svg" else None)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    finally:
        plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m gradcodec.plot", description=__doc__.splitlines()[0])
    ap.add_argument("report", help="a bench report (gradcodec bench --json F), or - for standard input")
    ap.add_argument("-o", "--output", required=True, help="the chart: .svg, .png or .pdf")
    ap.add_argument("--title", help="a title above the panels")
    a = ap.parse_args(argv)
    try:
        if a.report == "-":
            report = json.load(sys.stdin)
        else:
            with open(a.report, encoding="utf-8") as f:
                report = json.load(f)
        if not isinstance(report, dict) or not isinstance(report.get("rows"), list):
            raise InputError(f"{a.report}: not a gradcodec bench report (no 'rows')")
        plot(report, a.output, title=a.title)
    except (OSError, ValueError) as e:
        code = e.exit_code if isinstance(e, UsageError) else 2
        print(f"gradcodec: error: {e}", file=sys.stderr)
        return code
    except InputError as e:
        print(f"gradcodec: error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
