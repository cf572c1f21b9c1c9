"""What the commands share: the config of `--config`/`--set`/`--index-dir`/`--collection`, the retrieval stack of
an existing collection, and the SIGTERM that ends a command like Ctrl-C."""

from __future__ import annotations

from switchyard.errors import CollectionNotFound


def load_config(args):
    """The config the common options name: defaults < `--config` FILE < `--set` overrides < `--index-dir` and
    `--collection`."""
    from switchyard.configs.loader import load_config

    overrides = list(args.overrides)
    if getattr(args, "index_dir", None):
        overrides.append(f"store.uri={args.index_dir}")
    if getattr(args, "collection", None):
        overrides.append(f"store.collection={args.collection}")
    return load_config(args.config, overrides)


def stack(args):
    from switchyard.retrievers.stack import RetrievalStack

    return RetrievalStack(load_config(args))


def existing_stack(args):
    """The retrieval stack of the collection the options name, which must exist."""
    found = stack(args)
    if not found.store.exists():
        raise CollectionNotFound(f"collection {found.collection!r} does not exist in {found.config.store.uri}")
    return found


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that `finally` blocks run."""


def raise_terminated(signum, frame):
    raise Terminated
