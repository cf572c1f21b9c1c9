"""The server itself: liveness, Prometheus metrics and the served pipelines."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from switchyard.service.dependencies import PrincipalDep, ServiceDep, require_admin
from switchyard.service.metrics import CONTENT_TYPE
from switchyard.service.schemas import Health, PipelineInfo

router = APIRouter()


@router.get("/healthz", response_model=Health)
def healthz(service: ServiceDep) -> dict[str, Any]:
    return {"status": "ok", "pipelines": service.registry.names()}


@router.get("/metrics")
def metrics(service: ServiceDep, principal: PrincipalDep) -> Response:
    require_admin(principal, "the metrics")
    return Response(service.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/v1/pipelines", response_model=list[PipelineInfo])
def pipelines(service: ServiceDep) -> list[dict]:
    return service.registry.describe()
