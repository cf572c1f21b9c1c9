"""PNG charts of an evaluation report, drawn with matplotlib on the Agg canvas (no display, no pyplot state, so
safe from threads and servers): grouped bars with interval error bars, and accuracy against a cost with the
accuracy-vs-cost frontier. Accuracy (the y axis) lies in [0, 1]."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_SIZE, _DPI = (7.6, 4.4), 100


@dataclass(frozen=True)
class Estimate:
    """A value with its interval: `low`/`high` the bounds of the error bar (None: no bar)."""

    value: float
    low: float | None = None
    high: float | None = None

    def error(self) -> tuple[float, float]:
        """(below, above) lengths of the error bar, 0 where there is no bound."""
        below = self.value - self.low if self.low is not None else 0.0
        above = self.high - self.value if self.high is not None else 0.0
        return max(below, 0.0), max(above, 0.0)


def _note(fig: Figure, note: str) -> None:
    """What the marks and bars are, under the axes (a figure x-label, so the constrained layout makes room)."""
    fig.supxlabel(note, x=0.01, ha="left", fontsize="x-small", wrap=True)


def _save(fig: Figure, path: Path) -> None:
    FigureCanvasAgg(fig)  # attaches the Agg canvas; savefig renders with it
    fig.savefig(path, dpi=_DPI)


def bars(
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str,
    groups: list[str],
    series: list[str],
    values: list[list[Estimate | None]],
    note: str,
) -> None:
    """Grouped bars: one group per `groups` entry, one bar per `series` entry (values[g][s]; None: no bar), each
    with its error bar; `note` says under the axes what the bars are."""
    fig = Figure(figsize=_SIZE, layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / max(len(series), 1)
    for s, name in enumerate(series):
        xs, heights = [], []
        err: list[list[float]] = [[], []]
        for g in range(len(groups)):
            est = values[g][s]
            if est is None:
                continue
            below, above = est.error()
            xs.append(g - 0.4 + width * (s + 0.5))
            heights.append(est.value)
            err[0].append(below)
            err[1].append(above)
        ax.bar(
            xs,
            heights,
            width * 0.95,
            yerr=err,
            capsize=3,
            label=name,
            color=f"C{s % 10}",
            error_kw={"elinewidth": 1, "ecolor": "black"},
        )
    ax.set_xticks(range(len(groups)), groups)
    ax.set_xlabel(xlabel)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", frameon=False)
    ax.grid(axis="y", alpha=0.3)
    _note(fig, note)
    _save(fig, path)


def frontier(
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str,
    points: dict[str, tuple[Estimate, Estimate]],
    front: list[str],
    note: str,
) -> None:
    """Accuracy against a cost, one labelled point per config ({name: (cost, accuracy)}) with its error bars in
    both directions, and the frontier (`front`, by increasing cost) drawn as a step line: the best accuracy
    reachable at each cost."""
    fig = Figure(figsize=_SIZE, layout="constrained")
    ax = fig.add_subplot()
    for i, (name, (x, y)) in enumerate(points.items()):
        xerr, yerr = x.error(), y.error()
        ax.errorbar(
            [x.value],
            [y.value],
            xerr=[[xerr[0]], [xerr[1]]],
            yerr=[[yerr[0]], [yerr[1]]],
            fmt="o",
            capsize=3,
            color=f"C{i % 10}",
            label=name,
            markersize=7,
            zorder=3,
        )
        ax.annotate(name, (x.value, y.value), textcoords="offset points", xytext=(6, 6), fontsize="small")
    if front:
        fx = [points[n][0].value for n in front]
        fy = [points[n][1].value for n in front]
        ax.step(fx, fy, where="post", color="grey", linestyle="--", linewidth=1, zorder=1, label="frontier")
    right = max([p[0].high or p[0].value for p in points.values()] + [1e-9]) * 1.15
    ax.set_xlim(-0.03 * right, right)  # a little room left of 0, where configs without LLM calls sit
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", frameon=False)
    ax.grid(alpha=0.3)
    _note(fig, note)
    _save(fig, path)
