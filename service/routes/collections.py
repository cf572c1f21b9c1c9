"""Collections and their documents: list, upload (202 and a job), delete. A collection the caller may not read is
the same 404 as one that does not exist; changing one needs a key with --write, creating one an admin key. Writes
respect reads: uploading over, re-labelling or deleting a document the caller may not read is the 404 of a document
that does not exist, and changes nothing."""

from __future__ import annotations

import os
import shutil
from typing import Any

import anyio
from fastapi import APIRouter, File, Form, Request, UploadFile

from switchyard.errors import NotFound, ServiceError
from switchyard.retrievers.filters import parse_labels
from switchyard.retrievers.ingest import hidden_documents
from switchyard.service.audit import note
from switchyard.service.dependencies import (
    CollectionStore,
    PrincipalDep,
    ServiceDep,
    readable_pipeline,
    require_admin,
    require_write,
)
from switchyard.service.jobs import safe_name
from switchyard.service.schemas import (
    AUTHENTICATED,
    CollectionInfo,
    Deleted,
    DocumentInfo,
    UploadAccepted,
    error_responses,
)

router = APIRouter(responses=error_responses(*AUTHENTICATED, 400, 404, 409))


@router.get("/v1/collections", response_model=list[CollectionInfo])
def collections(service: ServiceDep, principal: PrincipalDep) -> list[dict[str, Any]]:
    return [
        {"name": name, "chunks": service.registry.stack(name).store.count(principal.scope)}
        for name in service.collections(principal)
    ]


@router.get("/v1/collections/{name}/documents", response_model=list[DocumentInfo])
def documents(name: str, store: CollectionStore, principal: PrincipalDep) -> list[dict]:
    return store.list_documents(principal.scope)


@router.delete("/v1/collections/{name}/documents/{doc_id}", response_model=Deleted, responses=error_responses(403))
def delete_document(name: str, doc_id: str, store: CollectionStore, principal: PrincipalDep) -> dict[str, Any]:
    require_write(principal, name)
    removed = store.delete_documents([doc_id], principal.scope)
    if not removed:
        raise NotFound(f"no document {doc_id!r} in collection {name!r}")
    return {"deleted": doc_id, "chunks": removed}


@router.post(
    "/v1/collections/{name}/documents",
    status_code=202,
    response_model=UploadAccepted,
    responses=error_responses(403, 413),
)
async def upload(
    name: str,
    request: Request,
    service: ServiceDep,
    principal: PrincipalDep,
    files: list[UploadFile] = File(...),
    acl: str | None = Form(None, description="access labels of the uploaded documents, e.g. 'hr,finance'"),
) -> dict[str, Any]:
    note(request, name)
    readable_pipeline(service, principal, None, name, create=True)  # validates the name; 404 if not the caller's
    if name not in service.collections():
        require_admin(principal, f"creating collection {name!r}")
    else:
        require_write(principal, name)
    labels = parse_labels(acl)  # AccessError: 400
    settings = service.settings
    if len(files) > settings.max_upload_files:
        raise ServiceError(413, f"at most {settings.max_upload_files} files per upload")
    names: list[str] = []
    for upload_file in files:
        names.append(_unique(safe_name(upload_file.filename), names))
    _refuse_hidden(service, principal, name, names)
    staged = service.jobs.staging()
    try:
        for upload_file, stored in zip(files, names):
            size = 0
            with (staged / stored).open("wb") as out:
                while chunk := await upload_file.read(1 << 20):
                    size += len(chunk)
                    if size > settings.max_upload_bytes:
                        raise ServiceError(
                            413, f"{upload_file.filename!r} is larger than {settings.max_upload_bytes} bytes"
                        )
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())  # on disk before the job is recorded: an accepted upload is never lost
        job = await anyio.to_thread.run_sync(service.jobs.submit, name, staged, names, labels, principal.scope)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return {"job_id": job.id, "status_url": f"/v1/jobs/{job.id}", "files": names}


def _refuse_hidden(service, principal, collection: str, names: list[str]) -> None:
    """Writes respect reads: a file name whose indexed documents the caller may not read is the 404 of a document
    that does not exist, before anything is stored (its upload folder copy included)."""
    if collection not in service.collections():
        return
    hidden = set(hidden_documents(service.registry.stack(collection).store, principal.scope).values())
    home = service.settings.upload_dir / collection
    for stored in names:
        if str((home / stored).resolve()) in hidden:
            raise NotFound(f"no document {stored!r} in collection {collection!r}")


def _unique(name: str, taken: list[str]) -> str:
    stem, dot, ext = name.rpartition(".") if "." in name else (name, "", "")
    candidate, i = name, 1
    while candidate in taken:
        i += 1
        candidate = f"{stem}-{i}{dot}{ext}"
    return candidate
