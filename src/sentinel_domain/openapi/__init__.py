"""OpenAPI change ingestion: safe parsing under caps, internal `$ref` resolution, and a diff at the level of
operations, parameters, request bodies, responses, schemas and security, each change classified as breaking
or not (issue 3; DOMAIN.md, change context and obligations).

Pure: no I/O, no clock, no network. Imports only the standard library, and PyYAML's safe building blocks
when a document arrives as YAML text (lazily: every handler imports the core at cold start, few read YAML).

Three rules shape everything here:

* **Refuse rather than guess.** A document that cannot be parsed, is not OpenAPI 3.0/3.1, has the wrong shape
  where the diff needs a shape, refers outside itself (`$ref` to a file or URL: never fetched), or exceeds a
  cap (size, depth, nodes, `$ref` hops, diff work) raises `MalformedOpenApi`. It is never "no changes".
* **Breaking has the consumer's meaning.** A change is breaking when it can break an existing client.
  Values the client *sends* (parameters, request bodies) break it when the API accepts fewer of them
  (tightened); values the client *receives* (responses) break it when the API may produce more of them
  (loosened). For webhooks and callbacks the API is the sender, so the two directions swap. A change whose
  effect cannot be proved (a pattern replaced by another, an unmodelled keyword) is breaking.
* **Documentation is not the contract.** Descriptions, summaries, titles, examples, tags, `x-` extensions and
  `info` never make a change, except the extensions that carry rules (`x-stability-level`, `x-sunset` on an
  operation, `x-extensible-enum` on a schema: lifecycle.py, schema_values.py). Anything else that differs
  and is not modelled still makes a change (generic, breaking), so nothing semantic is silently dropped.

Where things live: `limits` (caps, Budget) and `errors` (MalformedOpenApi, quote) are shared by all; `loader`
reads a side under the caps into a `document.Document`; `differ` pairs operations and walks each through its
rule families (`lifecycle`, `messages`, `security`) over `schemas`, and reports in the terms of `changes`.
Each change has a stable id (`kind`) and a level (breaking, warning, info); `lifecycle.DiffOptions` carries
a derivation rule's options for grading some of them.
"""

from .changes import BREAKING, INFO, LEVELS, WARNING, ApiChange, OpenApiDiff, OperationDiff
from .differ import diff_openapi, diff_openapi_graded
from .errors import MalformedOpenApi, quote
from .lifecycle import DiffOptions
from .limits import MAX_CHANGE_NODES, MAX_DEPTH, MAX_DOCUMENT_CHARS, MAX_NODES, MAX_REF_HOPS, Budget
from .loader import load_document

__all__ = [
    "BREAKING",
    "INFO",
    "LEVELS",
    "WARNING",
    "DiffOptions",
    "MAX_CHANGE_NODES",
    "MAX_DEPTH",
    "MAX_DOCUMENT_CHARS",
    "MAX_NODES",
    "MAX_REF_HOPS",
    "ApiChange",
    "Budget",
    "MalformedOpenApi",
    "OpenApiDiff",
    "OperationDiff",
    "diff_openapi",
    "diff_openapi_graded",
    "load_document",
    "quote",
]
