"""The index's documents: ingest, list, delete."""

from __future__ import annotations

import json
import sys

from switchyard.commands.common import existing_stack, stack
from switchyard.errors import EXIT_FAIL
from switchyard.extras import NO_RAY, import_with_extra
from switchyard.run_context import ALL


def cmd_ingest(args) -> int:
    ray_ingest = import_with_extra("switchyard.retrievers.ray_ingest", "ray", NO_RAY) if args.ray else None
    target = stack(args)
    ingestor = target.ingestor(progress=False if args.no_progress else None)
    executor = None
    if ray_ingest:
        ray_ingest.connect(args.ray)
        executor = ray_ingest.RayExecutor(
            target.config, target.store.windows, progress=ingestor.progress, fields=target.store.vector_fields
        )
    report = ingestor.run(args.paths, acl=args.acl, executor=executor)
    for err in report.errors:
        print(f"error: {err}", file=sys.stderr)
    print(f"{target.collection}: {report.summary()}")
    return 0 if report.ingested or not report.errors else EXIT_FAIL


def cmd_list(args) -> int:
    target = existing_stack(args)
    docs = target.store.list_documents(ALL)  # the local user reads every document
    if args.json:
        print(json.dumps(docs, indent=2))
        return 0
    for d in docs:
        pages = f", {d['pages']} pages" if d["pages"] else ""
        print(f"{d['doc_id']}\t{d['chunks']} chunks{pages}\t{d['title']}\t{d['source']}")
    print(f"{len(docs)} document(s) in {target.collection!r}")
    return 0


def cmd_delete(args) -> int:
    from switchyard.retrievers.ingest import delete_matching

    documents, chunks = delete_matching(existing_stack(args).store, args.targets, ALL)
    print(f"deleted {documents} document(s), {chunks} chunk(s)")
    return 0
