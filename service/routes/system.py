"""The server itself: liveness, Prometheus metrics and the served pipelines."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from switchyard.errors import StateUnavailable
from switchyard.service.dependencies import PrincipalDep, ServiceDep, require_admin
from switchyard.service.metrics import CONTENT_TYPE
from switchyard.service.schemas import AUTHENTICATED, Health, PipelineInfo, error_responses

router = APIRouter()


@router.get("/healthz", response_model=Health, responses={503: {"model": Health, "description": "state unavailable"}})
def healthz(service: ServiceDep, response: Response) -> dict[str, Any]:
    """Liveness, and whether the shared state (service/state.py) can be used: 503 while its database is down."""
    state = service.state.health()
    if not state["ok"]:
        response.status_code = 503
        response.headers["Retry-After"] = str(StateUnavailable.RETRY_AFTER_S)
    return {"status": "ok" if state["ok"] else "unavailable", "pipelines": service.registry.names(), "state": state}


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
