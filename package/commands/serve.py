"""Serving: serve (the HTTP service), mcp (the MCP server on stdio), keys (the API keys they accept), state (moving
a server's state into the PostgreSQL database several servers share)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from switchyard.commands.common import load_config
from switchyard.errors import UsageError
from switchyard.extras import needs_extra


def _overrides(args) -> tuple[str, ...]:
    """`--set` for every served config, and `--index-dir` as store.uri."""
    return tuple(args.overrides) + ((f"store.uri={args.index_dir}",) if args.index_dir else ())


def cmd_serve(args) -> int:
    from switchyard.service.memory import limit_heap_growth

    limit_heap_growth()  # before the models load and the threads start: this process is the server's own
    with needs_extra("server", "switchyard serve"):
        import uvicorn

        from switchyard.service.app import create_app
        from switchyard.service.auth import describe_credentials
        from switchyard.service.settings import ServiceSettings
        from switchyard.service.state import state_url

    try:
        settings = ServiceSettings(
            configs=tuple(args.configs or ["fixed"]),
            overrides=_overrides(args),
            max_in_flight=args.max_in_flight,
            request_timeout_s=args.timeout,
            max_question_chars=args.max_question_chars,
            max_upload_files=args.max_upload_files,
            max_upload_bytes=int(args.max_upload_mb * 2**20),
            upload_dir=Path(args.upload_dir),
            warm_up=not args.no_warm_up,
            audit_log=Path(args.audit_log) if args.audit_log else None,
            audit_questions=args.audit_questions,
            token_with_keys=args.allow_token_with_keys,
            state_url=state_url(args.state),
            job_lease_s=args.job_lease,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    # configs and the key file are loaded and checked here: a bad config or an unsafe key file is a one-line error
    app = create_app(settings)
    service = app.state.service
    print(
        f"switchyard: serving {', '.join(service.registry.names())} on http://{args.host}:{args.port}/",
        file=sys.stderr,
    )
    print(
        "switchyard: " + describe_credentials(settings.api_token, service.keys, settings.token_with_keys),
        file=sys.stderr,
    )
    print(
        f"switchyard: state in {service.keys.where if settings.state_url else 'local files'}",
        file=sys.stderr,
        flush=True,
    )
    # idle connections are kept longer than clients' usual 5 s expiry, so a client never reuses one as it is dropped
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            timeout_keep_alive=30,
            timeout_graceful_shutdown=max(5, int(args.timeout)),
        )
    )
    server.run()
    return 0


def cmd_mcp(args) -> int:
    with needs_extra("server", "switchyard mcp"):
        from switchyard.service.mcp_server import create_mcp_server
        from switchyard.service.registry import PipelineRegistry

    registry = PipelineRegistry(tuple(args.configs or ["fixed"]), _overrides(args))  # a bad config: one line
    print(f"switchyard: MCP server on stdio, pipelines {', '.join(registry.names())}", file=sys.stderr, flush=True)
    # stdout carries the protocol alone: while serving, the SDK points fd 1 at stderr for everything else
    create_mcp_server(registry).run("stdio")
    return 0


def cmd_keys(args) -> int:
    from switchyard.service.state import open_state, state_url

    state = open_state(state_url(args.state), load_config(args).store.uri, Path(args.upload_dir))
    try:
        return _keys(args, state.keys)
    finally:
        state.close()


def _keys(args, store) -> int:
    if args.keys_action == "create":
        key = store.create(
            args.name,
            args.collections,
            write=args.write,
            admin=args.admin,
            groups=args.groups,
            rpm=args.rpm,
            max_in_flight=args.max_in_flight,
        )
        print(key)
        print(f"key {args.name!r} created in {store.where}; it is shown only now", file=sys.stderr)
    elif args.keys_action == "revoke":
        store.revoke(args.name)
        print(f"key {args.name!r} revoked", file=sys.stderr)
    elif args.json:
        print(json.dumps(store.list(), indent=2))
    else:
        for k in store.list():
            rights = "admin" if k["admin"] else ("read+write" if k["write"] else "read")
            print(
                f"{k['name']}\t{rights}\tcollections={','.join(k['collections']) or '*'}\t"
                f"groups={','.join(k['groups']) or '-'}\trpm={k['rpm'] or '-'}\tin_flight={k['max_in_flight'] or '-'}"
            )
    return 0


def cmd_state(args) -> int:
    from switchyard.service.state import state_url

    url = state_url(args.url)
    if url is None:
        raise UsageError("state migrate needs --to postgresql://... (or SWITCHYARD_STATE_URL)")
    with needs_extra("postgres", "switchyard state migrate"):
        from switchyard.service.state_migration import migrate_state

    done = migrate_state(Path(args.source), url)
    print(f"switchyard: state migrated from {args.source}: {done.summary()}", file=sys.stderr)
    return 0
