"""The caps on what one document, and one change context, may cost to read and compare, and the budget that
counts the shared ones. Passing a cap raises MalformedOpenApi: a document too big to read is refused."""

from __future__ import annotations

from .errors import MalformedOpenApi

MAX_DOCUMENT_CHARS = 2 * 1024 * 1024
"""The largest document text read (the route's body limit is the same, so this only guards direct callers)."""
MAX_DEPTH = 100
"""The deepest nesting of objects and arrays in a document, YAML aliases expanded; the root is depth 1."""
MAX_NODES = 200_000
"""The most nodes (objects, arrays, keys and scalars; YAML aliases expanded) in one document."""
MAX_CHANGE_NODES = 500_000
"""The most nodes over all the documents of one change context."""
MAX_REF_HOPS = 32
"""The longest chain of `$ref` to `$ref` followed before the target must be reached."""
MAX_DIFF_STEPS = 1_000_000
"""The most schema comparisons and projections one change context may cost."""
MAX_COMPARE_DEPTH = 150
"""How deep a comparison may descend (schemas nest through `$ref`, so documents alone do not bound it)."""
MAX_TEMPLATE_CHARS = 512


# ---- budget ---------------------------------------------------------------------------------------------


class Budget:
    """Work and memory caps shared by every document of one change context."""

    def __init__(self, nodes: int | None = None, steps: int | None = None) -> None:
        self.nodes = MAX_CHANGE_NODES if nodes is None else nodes
        self.steps = MAX_DIFF_STEPS if steps is None else steps

    def take_nodes(self, count: int) -> None:
        self.nodes -= count
        if self.nodes < 0:
            raise MalformedOpenApi(
                f"the change context's OpenAPI documents hold more than {MAX_CHANGE_NODES} nodes in all"
            )

    def step(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise MalformedOpenApi(
                f"comparing the documents needs more than {MAX_DIFF_STEPS} steps; refusing rather than "
                "comparing part of them"
            )
