"""`GET /v1/pipelines` with every shipped config served together (the web page loads it to list them): each is
listed with its own graph mode, closed-book's `closed_book` included. No model is loaded: a server that does not
warm up builds its pipelines' graphs only."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from switchyard.configs.loader import load_config
from switchyard.configs.schema import GraphConfig
from switchyard.service.app import create_app
from switchyard.service.schemas import PipelineInfo
from switchyard.service.settings import ServiceSettings
from tests.conftest import ROOT

SHIPPED = tuple(sorted(path.stem for path in (ROOT / "configs").glob("*.yaml")))


@pytest.fixture(scope="module")
def listed(tmp_path_factory):
    index = tmp_path_factory.mktemp("index")
    app = create_app(
        ServiceSettings(
            configs=SHIPPED,
            overrides=(f"store.uri={index}",),
            warm_up=False,
            api_token=None,
            upload_dir=str(tmp_path_factory.mktemp("uploads")),
        )
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        return client.get("/v1/pipelines")


def test_every_shipped_config_is_listed_with_its_mode(listed):
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert [p["name"] for p in body] == list(SHIPPED)
    for pipeline in body:
        config = load_config(ROOT / "configs" / f"{pipeline['name']}.yaml")
        assert pipeline["mode"] == config.graph.mode, pipeline["name"]
        assert Path(pipeline["config"]).name == f"{pipeline['name']}.yaml"
        assert pipeline["mermaid"].lstrip().startswith(("graph", "---", "%%"))
        assert pipeline["approve"] == (config.graph.mode == "agent" and config.graph.router.approve)
    modes = {p["name"]: p["mode"] for p in body}
    assert modes["closed-book"] == "closed_book" and modes["fixed"] == "fixed" and modes["agent"] == "agent"


def test_the_listed_mode_is_the_config_schemas_own_type():
    """One type for graph.mode and the listing's mode: a mode added to the schema is listed, never a 500."""
    mode = PipelineInfo.model_fields["mode"].annotation
    assert mode is GraphConfig.model_fields["mode"].annotation
    assert set(typing.get_args(mode)) == {"fixed", "agent", "closed_book"}
