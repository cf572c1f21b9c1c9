"""The server itself: liveness, Prometheus metrics and the served pipelines."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from switchyard.service.dependencies import PrincipalDep, ServiceDep, require_admin
from switchyard.service.metrics import CONTENT_TYPE
from switchyard.service.schemas import AUTHENTICATED, Health, PipelineInfo, error_responses

router = APIRouter()


@router.get("/healthz", response_model=Health)
def healthz(service: ServiceDep) -> dict[str, Any]:
    return {"status": "ok", "pipelines": service.registry.names()}


@router.get(
    "/metrics",
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "Prometheus text format"},
        **error_responses(*AUTHENTICATED, 403),
    },
)
def metrics(service: ServiceDep, principal: PrincipalDep) -> Response:
    require_admin(principal, "the metrics")
    return Response(service.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/v1/pipelines", response_model=list[PipelineInfo], responses=error_responses(*AUTHENTICATED))
def pipelines(service: ServiceDep) -> list[dict]:
    return service.registry.describe()
