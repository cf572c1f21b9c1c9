"""The drawn topology of every shipped config is locked by a snapshot (SWITCHYARD_UPDATE_SNAPSHOTS=1 rewrites)."""

import os
from pathlib import Path

import pytest

from switchyard.configs.loader import CONFIG_DIR, load_config
from switchyard.graphs import draw
from switchyard.graphs.build import build_graph

SNAPSHOTS = Path(__file__).parent / "snapshots"
CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_topology_snapshot(path):
    got = draw.topology(build_graph(load_config(path)))
    snap = SNAPSHOTS / f"{path.stem}.txt"
    if os.environ.get("SWITCHYARD_UPDATE_SNAPSHOTS"):
        snap.write_text(got)
    assert snap.exists(), f"no snapshot for {path.name}: run with SWITCHYARD_UPDATE_SNAPSHOTS=1 and review it"
    assert got == snap.read_text()


@pytest.fixture(scope="module")
def graph():
    return build_graph(load_config())


class TestDraw:
    def test_mermaid_shows_conditional_edges(self, graph):
        text = draw.render(graph, "mermaid")
        assert "grade -. &nbsp;retry&nbsp; .-> rewrite" in text
        assert "grade -. &nbsp;exhausted&nbsp; .-> abstain" in text

    def test_ascii_lists_conditional_edges(self, graph):
        text = draw.render(graph, "ascii")
        assert "| rewrite |" in text and "grade --retry--> rewrite" in text

    def test_svg_and_png(self, graph, tmp_path):
        svg = draw.render(graph, "svg")
        assert svg.startswith("<svg") and svg.count("<rect") == 1 + 10 and "retry" in svg
        # grade's three routes, START's three (graph.no_documents, a conversation's turn), contextualize's two
        assert svg.count("stroke-dasharray") == 8
        draw.write(graph, "png", tmp_path / "g.png")
        from PIL import Image

        with Image.open(tmp_path / "g.png") as img:
            assert img.format == "PNG" and img.width > 300 and img.height > 500

    def test_png_needs_a_file(self, graph):
        with pytest.raises(ValueError, match="--out"):
            draw.write(graph, "png", None)
