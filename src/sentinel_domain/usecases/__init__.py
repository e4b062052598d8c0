"""The use cases behind every route: each loads a chain, applies the rules, and appends one fact with its
audit event in one write (or refuses and changes nothing), answering a typed outcome
(sentinel_domain.outcomes).

One module per concern (projects, candidates, plans, reviews, actions, evidence, decisions, audit), all run on
the chain transaction in `chain`; `Gate` is the one object callers hold."""

from .chain import LEASE_SECONDS, RETRIES, Chain, CommitRequest
from .gate import Gate

__all__ = ["LEASE_SECONDS", "RETRIES", "Chain", "CommitRequest", "Gate"]
