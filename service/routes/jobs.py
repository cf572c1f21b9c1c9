"""Upload jobs: state, progress and per-file status (also after a restart). Another tenant's job is a 404, like
one that does not exist."""

from __future__ import annotations

from fastapi import APIRouter, Request

from switchyard.errors import NotFound
from switchyard.service.audit import note
from switchyard.service.dependencies import PrincipalDep, ServiceDep
from switchyard.service.schemas import AUTHENTICATED, JobStatus, error_responses

router = APIRouter(responses=error_responses(*AUTHENTICATED, 404))


@router.get("/v1/jobs/{job_id}", response_model=JobStatus)
def job(job_id: str, request: Request, service: ServiceDep, principal: PrincipalDep) -> dict:
    found = service.jobs.get(job_id)
    if found is None or not principal.can_read(found["collection"]):
        raise NotFound(f"no job {job_id!r}")
    note(request, found["collection"])
    return found
