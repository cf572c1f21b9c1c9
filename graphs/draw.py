"""Draw a compiled graph fully offline: Mermaid text, ASCII, SVG or PNG.

Mermaid and the ASCII picture come from LangGraph itself (the ASCII form also lists every conditional edge with
its route key under the picture). LangGraph's PNG helper calls a web service, so SVG and PNG are rendered here:
a layered layout, back edges routed along the right margin, conditional edges dashed and labelled, PNG via Pillow.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from switchyard.extras import needs_extra

FORMATS = ("mermaid", "ascii", "svg", "png")
_W, _H, _GAP_X, _GAP_Y, _MARGIN = 150, 40, 50, 70, 40


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str
    conditional: bool


def edges_of(compiled) -> tuple[list[str], list[Edge]]:
    g = compiled.get_graph()
    edges = [Edge(e.source, e.target, str(e.data) if e.data else "", bool(e.conditional)) for e in g.edges]
    return list(g.nodes), edges


def topology(compiled) -> str:
    """A stable text form of the graph for snapshot tests: nodes, then edges (conditional ones marked)."""
    nodes, edges = edges_of(compiled)
    lines = [f"node {n}" for n in sorted(nodes)]
    lines += sorted(
        f"edge {e.source} -{'?' if e.conditional else '-'}-> {e.target}" + (f" [{e.label}]" if e.label else "")
        for e in edges
    )
    return "\n".join(lines) + "\n"


def _layers(nodes: list[str], edges: list[Edge]) -> dict[str, int]:
    """Longest-path layering from __start__, ignoring edges that close a cycle."""
    out: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        out[e.source].append(e.target)
    order, state = [], {}

    def visit(n: str) -> None:  # DFS post-order; back edges are skipped
        state[n] = 1
        for m in out[n]:
            if state.get(m) is None:
                visit(m)
        state[n] = 2
        order.append(n)

    for n in ["__start__"] + nodes:
        if n in out and state.get(n) is None:
            visit(n)
    rank = {n: 0 for n in nodes}
    position = {n: i for i, n in enumerate(reversed(order))}
    for n in reversed(order):
        for m in out[n]:
            if position[m] > position[n]:
                rank[m] = max(rank[m], rank[n] + 1)
    return rank


def _layout(nodes: list[str], edges: list[Edge]) -> tuple[dict[str, tuple[float, float]], int, int]:
    rank = _layers(nodes, edges)
    by_layer: dict[int, list[str]] = {}
    for n in nodes:
        by_layer.setdefault(rank[n], []).append(n)
    widest = max(len(v) for v in by_layer.values())
    width = 2 * _MARGIN + widest * _W + (widest - 1) * _GAP_X + 160 + 12 * len(edges)
    height = 2 * _MARGIN + len(by_layer) * _H + (len(by_layer) - 1) * _GAP_Y
    pos = {}
    for layer, members in by_layer.items():
        row_w = len(members) * _W + (len(members) - 1) * _GAP_X
        x0 = _MARGIN + ((widest * _W + (widest - 1) * _GAP_X) - row_w) / 2
        for i, n in enumerate(members):
            pos[n] = (x0 + i * (_W + _GAP_X) + _W / 2, _MARGIN + layer * (_H + _GAP_Y) + _H / 2)
    return pos, int(width), int(height)


def _label(node: str) -> str:
    return {"__start__": "START", "__end__": "END"}.get(node, node)


def _route(edge: Edge, pos, lane: int = 0) -> list[tuple[float, float]]:
    (x1, y1), (x2, y2) = pos[edge.source], pos[edge.target]
    if y2 > y1:  # downwards: bottom of source to top of target
        return [(x1, y1 + _H / 2), (x2, y2 - _H / 2)]
    # a back edge gets its own lane: down out of the source, along under its row, up the right margin,
    # into the target's right side
    side = max(x for x, _ in pos.values()) + _W / 2 + 30 + 12 * lane
    below = y1 + _H / 2 + 10 + 6 * lane
    return [
        (x1, y1 + _H / 2),
        (x1, below),
        (side, below),
        (side, y2 + 6 * lane - 12),
        (x2 + _W / 2, y2 + 6 * lane - 12),
    ]


def _routes(edges: list[Edge], pos) -> list[list[tuple[float, float]]]:
    lanes, out = 0, []
    for e in edges:
        back = pos[e.target][1] <= pos[e.source][1]
        out.append(_route(e, pos, lanes if back else 0))
        lanes += back
    return out


def to_svg(compiled) -> str:
    nodes, edges = edges_of(compiled)
    pos, width, height = _layout(nodes, edges)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#333"/></marker></defs>',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for e, pts in zip(edges, _routes(edges, pos)):
        dash = ' stroke-dasharray="6 4"' if e.conditional else ""
        d = " ".join(f"{'M' if i == 0 else 'L'} {x:.1f} {y:.1f}" for i, (x, y) in enumerate(pts))
        parts.append(f'<path d="{d}" fill="none" stroke="#333" stroke-width="1.5"{dash} marker-end="url(#arrow)"/>')
        if e.label:
            (ax, ay), (bx, by) = pts[-2], pts[-1]
            parts.append(
                f'<text x="{(ax + bx) / 2 + 4:.1f}" y="{(ay + by) / 2 - 4:.1f}" fill="#555">'
                f"{html.escape(e.label)}</text>"
            )
    for n, (x, y) in pos.items():
        terminal = n in ("__start__", "__end__")
        parts.append(
            f'<rect x="{x - _W / 2:.1f}" y="{y - _H / 2:.1f}" width="{_W}" height="{_H}" '
            f'rx="{20 if terminal else 6}" fill="{"#e8e8e8" if terminal else "#dbe9ff"}" stroke="#333"/>'
        )
        parts.append(f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle">{html.escape(_label(n))}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def to_png(compiled) -> bytes:
    import io

    with needs_extra("draw", "a PNG of the graph"):
        from PIL import Image, ImageDraw, ImageFont

    nodes, edges = edges_of(compiled)
    pos, width, height = _layout(nodes, edges)
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=14)
    for e, pts in zip(edges, _routes(edges, pos)):
        for a, b in zip(pts, pts[1:]):
            _line(draw, a, b, dashed=e.conditional)
        _arrowhead(draw, pts[-2], pts[-1])
        if e.label:
            (ax, ay), (bx, by) = pts[-2], pts[-1]
            draw.text(((ax + bx) / 2 + 4, (ay + by) / 2 - 16), e.label, fill="#555555", font=font)
    for n, (x, y) in pos.items():
        terminal = n in ("__start__", "__end__")
        draw.rounded_rectangle(
            [x - _W / 2, y - _H / 2, x + _W / 2, y + _H / 2],
            radius=20 if terminal else 6,
            fill="#e8e8e8" if terminal else "#dbe9ff",
            outline="#333333",
        )
        draw.text((x, y), _label(n), fill="black", font=font, anchor="mm")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _line(draw, a, b, dashed: bool) -> None:
    if not dashed:
        draw.line([a, b], fill="#333333", width=2)
        return
    (x1, y1), (x2, y2) = a, b
    length = max(((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5, 1e-9)
    steps = int(length // 10)
    for i in range(0, steps + 1, 2):
        t0, t1 = i * 10 / length, min((i + 1) * 10 / length, 1.0)
        draw.line(
            [(x1 + (x2 - x1) * t0, y1 + (y2 - y1) * t0), (x1 + (x2 - x1) * t1, y1 + (y2 - y1) * t1)],
            fill="#333333",
            width=2,
        )


def _arrowhead(draw, a, b) -> None:
    (x1, y1), (x2, y2) = a, b
    length = max(((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5, 1e-9)
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    draw.polygon(
        [(x2, y2), (x2 - 10 * ux + 5 * uy, y2 - 10 * uy - 5 * ux), (x2 - 10 * ux - 5 * uy, y2 - 10 * uy + 5 * ux)],
        fill="#333333",
    )


def to_ascii(compiled) -> str:
    picture = compiled.get_graph().draw_ascii()
    _, edges = edges_of(compiled)
    conditional = [e for e in edges if e.conditional]
    lines = [picture.rstrip(), "", "conditional edges (dotted above):"]
    lines += [f"  {_label(e.source)} --{e.label or '?'}--> {_label(e.target)}" for e in conditional]
    return "\n".join(lines) + "\n"


def render(compiled, fmt: str) -> str | bytes:
    if fmt == "mermaid":
        return compiled.get_graph().draw_mermaid()
    if fmt == "ascii":
        return to_ascii(compiled)
    if fmt == "svg":
        return to_svg(compiled)
    if fmt == "png":
        return to_png(compiled)
    raise ValueError(f"unknown format {fmt!r} ({', '.join(FORMATS)})")


def write(compiled, fmt: str, out: str | Path | None) -> str | None:
    """Write to `out` (required for png), or return the text."""
    data = render(compiled, fmt)
    if out is None:
        if isinstance(data, bytes):
            raise ValueError("--format png needs --out FILE")
        return data
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data) if isinstance(data, bytes) else path.write_text(data)
    return None
