"""Which collections a caller may use: the one check the HTTP routes and the MCP tools and resources share.

A collection the caller may not read and one that does not exist give the same `CollectionNotFound` (404 over
HTTP, a tool error over MCP), with the same words, so a key learns nothing of the other tenants' collections. Which
documents a caller reads inside a collection is its access scope (`Principal.scope`: its groups, or ALL), carried down to the LanceDB
queries by every search, run, listing and count.
"""

from __future__ import annotations

from switchyard.configs.schema import StoreConfig
from switchyard.errors import CollectionNotFound, UnknownPipeline, UsageError
from switchyard.graphs.pipeline import Pipeline
from switchyard.service.keys import Principal
from switchyard.service.registry import PipelineRegistry


class CollectionAccess:
    def __init__(self, registry: PipelineRegistry):
        self.registry = registry

    def visible(self, principal: Principal) -> list[str]:
        """The collections of the index that `principal` may read."""
        names = self.registry.get().resources.stack.store.collections()
        return [n for n in names if principal.can_read(n)]

    def missing(self, principal: Principal, name: str) -> CollectionNotFound:
        """The error of a collection that does not exist or that `principal` may not read (the same words)."""
        return CollectionNotFound(
            f"collection {name!r} does not exist (collections: {', '.join(self.visible(principal)) or 'none'})"
        )

    def check(self, principal: Principal, name: str, must_exist: bool = True) -> str:
        """`name` if `principal` may read it and (with `must_exist`) it exists; else `missing`."""
        if not principal.can_read(name) or (must_exist and name not in self.visible(principal)):
            raise self.missing(principal, name)
        return name

    def pipeline_name(self, name: str | None) -> str:
        """A served pipeline's name (default: the first); `UnknownPipeline` for another."""
        if name is not None and name not in self.registry.configs:
            raise UnknownPipeline(name, self.registry.names())
        return name or self.registry.default

    def own_collection(self, pipeline: str) -> str:
        """The collection a served pipeline's config names."""
        return self.registry.configs[pipeline].store.collection

    def readable(self, principal: Principal, pipeline: str, collection: str) -> Pipeline:
        """The served pipeline over `collection`, which must exist and be `principal`'s to read."""
        return self.registry.get(self.pipeline_name(pipeline), self.check(principal, collection))


def valid_collection_name(name: str) -> str:
    """`name` if it can name a collection; a `UsageError` (400) otherwise."""
    try:
        StoreConfig(collection=name)
    except ValueError:
        raise UsageError(
            f"invalid collection name {name!r} (1-64 letters, digits, '_', '.', '-', starting with a letter or digit)"
        ) from None
    return name
