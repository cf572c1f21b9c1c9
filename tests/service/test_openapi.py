"""The OpenAPI document shows the response schemas the routes really answer with."""

from __future__ import annotations

import pytest

from switchyard.service.app import create_app
from switchyard.service.settings import ServiceSettings


@pytest.fixture(scope="module")
def openapi(tmp_path_factory):
    index = tmp_path_factory.mktemp("index")
    app = create_app(
        ServiceSettings(
            configs=("no-llm",),
            overrides=(f"store.uri={index}",),
            warm_up=False,
            upload_dir=str(tmp_path_factory.mktemp("uploads")),
        )
    )
    return app.openapi()


def response_schema(openapi: dict, method: str, path: str, status: str = "200") -> dict:
    return openapi["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]


class TestOpenAPI:
    @pytest.mark.parametrize(
        "method, path, status, model",
        [
            ("get", "/v1/threads/{thread_id}", "200", "ThreadStatus"),
            ("get", "/healthz", "200", "Health"),
            ("get", "/v1/jobs/{job_id}", "200", "JobStatus"),
            ("delete", "/v1/collections/{name}/documents/{doc_id}", "200", "Deleted"),
            ("post", "/v1/collections/{name}/documents", "202", "UploadAccepted"),
        ],
    )
    def test_routes_name_their_models(self, openapi, method, path, status, model):
        assert response_schema(openapi, method, path, status) == {"$ref": f"#/components/schemas/{model}"}

    @pytest.mark.parametrize(
        "method, path, models",
        [
            ("post", "/v1/ask", ["AskResult", "Paused", "ThreadDone"]),  # Paused, ThreadDone: graph.router.approve
            ("post", "/v1/threads/{thread_id}/resume", ["Paused", "ThreadDone"]),
        ],
    )
    def test_runs_that_may_pause_name_each_model(self, openapi, method, path, models):
        schema = response_schema(openapi, method, path)
        assert schema["anyOf"] == [{"$ref": f"#/components/schemas/{m}"} for m in models]

    def test_the_resume_body_is_the_approval(self, openapi):
        body = openapi["paths"]["/v1/threads/{thread_id}/resume"]["post"]["requestBody"]["content"]
        assert body["application/json"]["schema"] == {"$ref": "#/components/schemas/Approval"}
        approval = openapi["components"]["schemas"]["Approval"]
        assert approval["properties"]["decision"]["enum"] == ["approve", "edit", "reject"]

    @pytest.mark.parametrize(
        "path, model",
        [
            ("/v1/pipelines", "PipelineInfo"),
            ("/v1/collections", "CollectionInfo"),
            ("/v1/collections/{name}/documents", "DocumentInfo"),
        ],
    )
    def test_lists_name_their_item_model(self, openapi, path, model):
        schema = response_schema(openapi, "get", path)
        assert schema["type"] == "array" and schema["items"] == {"$ref": f"#/components/schemas/{model}"}

    def test_the_ask_result_schema_is_the_pipelines_own(self, openapi):
        ask = openapi["components"]["schemas"]["AskResult"]
        assert {"answer", "short_answer", "citations", "trace", "usage", "failures"} <= set(ask["properties"])
        assert ask["properties"]["citations"]["items"] == {"$ref": "#/components/schemas/Citation"}
