"""Small offline PNG charts drawn with Pillow (no plotting library in the stack): grouped bars and a labelled
scatter. Values are assumed to lie in [0, 1] on the y axis (accuracy-like metrics)."""
from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

_W, _H, _L, _R, _T, _B = 760, 440, 70, 170, 50, 60
_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"]


def _canvas(title: str):
    img = Image.new("RGB", (_W, _H), "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=13)
    draw.text((_W / 2, 20), title, fill="black", font=ImageFont.load_default(size=16), anchor="mm")
    x0, y0, x1, y1 = _L, _T, _W - _R, _H - _B
    draw.line([(x0, y1), (x1, y1)], fill="black")
    draw.line([(x0, y0), (x0, y1)], fill="black")
    for i in range(6):
        y = y1 - (y1 - y0) * i / 5
        draw.line([(x0 - 4, y), (x0, y)], fill="black")
        draw.text((x0 - 8, y), f"{i / 5:.1f}", fill="black", font=font, anchor="rm")
    return img, draw, font, (x0, y0, x1, y1)


def _legend(draw, font, names: list[str]) -> None:
    for i, name in enumerate(names):
        y = _T + 18 * i
        draw.rectangle([_W - _R + 15, y, _W - _R + 27, y + 12], fill=_COLORS[i % len(_COLORS)])
        draw.text((_W - _R + 32, y + 6), name[:22], fill="black", font=font, anchor="lm")


def bars(path: Path, title: str, groups: list[str], series: list[str], values: list[list[float]]) -> None:
    img, draw, font, (x0, y0, x1, y1) = _canvas(title)
    slot = (x1 - x0) / max(len(groups), 1)
    width = slot * 0.8 / max(len(series), 1)
    for g, group in enumerate(groups):
        left = x0 + g * slot + slot * 0.1
        for s in range(len(series)):
            v = max(0.0, min(1.0, values[g][s]))
            draw.rectangle([left + s * width, y1 - (y1 - y0) * v, left + (s + 1) * width - 2, y1],
                           fill=_COLORS[s % len(_COLORS)])
        draw.text((x0 + (g + 0.5) * slot, y1 + 14), str(group), fill="black", font=font, anchor="mm")
    _legend(draw, font, series)
    img.save(path)


def scatter(path: Path, title: str, xlabel: str, points: list[tuple[str, float, float]]) -> None:
    img, draw, font, (x0, y0, x1, y1) = _canvas(title)
    xmax = max([x for _, x, _ in points] + [1e-9]) * 1.15
    for i in range(6):
        x = x0 + (x1 - x0) * i / 5
        draw.line([(x, y1), (x, y1 + 4)], fill="black")
        draw.text((x, y1 + 14), f"{xmax * i / 5:.1f}", fill="black", font=font, anchor="mm")
    draw.text(((x0 + x1) / 2, _H - 18), xlabel, fill="black", font=font, anchor="mm")
    for i, (name, x, y) in enumerate(points):
        px, py = x0 + (x1 - x0) * x / xmax, y1 - (y1 - y0) * max(0.0, min(1.0, y))
        draw.ellipse([px - 6, py - 6, px + 6, py + 6], fill=_COLORS[i % len(_COLORS)])
    _legend(draw, font, [n for n, _, _ in points])
    img.save(path)
