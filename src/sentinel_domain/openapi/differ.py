"""The diff of two documents: operations found and paired across them, each operation walked through its
rule families (messages.py, security.py, callbacks here; schemas.py underneath), and the changes to the whole
document. A new rule family is a _SchemaDiffer subclass in its own module, added to _Differ's bases and called
from _operation_body (or diff, for the whole document)."""

from __future__ import annotations

from typing import Any

from .changes import _FLIP, BREAKING, REQUEST, RESPONSE, WARNING, ApiChange, OpenApiDiff, OperationDiff
from .document import _PATH_TEMPLATE, _TEMPLATE_PARAM, _WEBHOOK_NAME, ANNOTATIONS, METHODS, Document
from .errors import MalformedOpenApi, quote
from .lifecycle import LIFECYCLE_KINDS, DiffOptions
from .limits import MAX_TEMPLATE_CHARS, Budget
from .loader import _load
from .messages import _MessageDiffer
from .schema_records import _Rec
from .security import _SecurityDiffer
from .servers import KIND as SERVERS_CHANGED
from .servers import server_changes


def _schema_path(path: tuple[str, ...]) -> str:
    """`category.tags[].name`: property names joined by dots, array items as []."""
    out = ""
    for part in path:
        out += part if part == "[]" or not out else "." + part
    return out


class _Differ(_MessageDiffer, _SecurityDiffer):
    """Compares two loaded documents. One instance per document pair; `budget` is shared."""

    # ---- operations --------------------------------------------------------------------------------------

    def operations(self, doc: Document) -> dict[str, tuple[str, dict[str, Any], dict[str, Any], str]]:
        """Every operation: key -> (matching key, operation, path item, path template or webhook name)."""
        found: dict[str, tuple[str, dict[str, Any], dict[str, Any], str]] = {}
        sources = (("paths", False), ("webhooks", True))
        for section, is_webhook in sources:
            items = doc.mapping(doc.root.get(section), section, deref=False)
            for template, raw_item in items.items():
                if is_webhook:
                    if not _WEBHOOK_NAME.match(template) or len(template) > MAX_TEMPLATE_CHARS:
                        raise MalformedOpenApi(f"the webhook name {quote(template)} is not a plain name")
                elif not _PATH_TEMPLATE.match(template) or len(template) > MAX_TEMPLATE_CHARS:
                    raise MalformedOpenApi(
                        f"the path {quote(template)} must start with / and use only URL path "
                        f"characters (at most {MAX_TEMPLATE_CHARS})"
                    )
                item = doc.path_item(raw_item, f"{section} {quote(template)}")
                for method in METHODS:
                    if method not in item:
                        continue
                    operation = doc.mapping(item[method], f"{method.upper()} {quote(template)}")
                    label = f"webhook:{template}" if is_webhook else template
                    key = f"{method.upper()} {label}"
                    # Templates that differ only in parameter names are the same endpoint.
                    match = f"{method.upper()} " + (
                        label if is_webhook else _TEMPLATE_PARAM.sub("{}", template)
                    )
                    found[key] = (match, operation, item, template)
        return found

    def diff(self) -> OpenApiDiff:
        old_ops = self.operations(self.old)
        new_ops = self.operations(self.new)
        pairs = {key: key for key in new_ops if key in old_ops}
        # A template whose variables were only renamed is the same endpoint, when that pairing is unambiguous
        # (a document may, against the specification, hold /pet/{id} and /pet/{petId} side by side).
        unpaired_old: dict[str, list[str]] = {}
        for key, value in old_ops.items():
            if key not in pairs:
                unpaired_old.setdefault(value[0], []).append(key)
        unpaired_new: dict[str, list[str]] = {}
        for key, value in new_ops.items():
            if key not in pairs:
                unpaired_new.setdefault(value[0], []).append(key)
        for match, keys in unpaired_new.items():
            if len(keys) == 1 and len(unpaired_old.get(match, [])) == 1:
                pairs[keys[0]] = unpaired_old[match][0]
        results: list[OperationDiff] = []
        for key, (_match, operation, item, template) in new_ops.items():
            old_key = pairs.get(key)
            if old_key is None:
                added = [ApiChange(key, "operation-added", False)]
                self.lifecycle.added(operation, self._adder(key, added), "")
                results.append(OperationDiff(key, "added", tuple(added)))
                continue
            webhook = key.split(" ", 1)[1].startswith("webhook:")
            _m, o_operation, o_item, o_template = old_ops[old_key]
            changes = self.operation(key, o_operation, operation, o_item, item, o_template, template, webhook)
            if changes:
                results.append(OperationDiff(key, "changed", tuple(changes)))
        paired_old = set(pairs.values())
        for key, (_m, o_operation, _item, _template) in old_ops.items():
            if key not in paired_old:
                kind, level, detail = self.lifecycle.removed(o_operation)
                removal = ApiChange(key, kind, level == BREAKING, "", detail, level=level)
                results.append(OperationDiff(key, "removed", (removal,)))
        document = []
        # How every schema is read: not an operation's change, but one that owes the whole document's checks.
        if self.old.root.get("jsonSchemaDialect") != self.new.root.get("jsonSchemaDialect"):
            document.append(
                ApiChange(
                    "",
                    "json-schema-dialect-changed",
                    False,
                    "jsonSchemaDialect",
                    f"{quote(self.old.root.get('jsonSchemaDialect'))} -> "
                    f"{quote(self.new.root.get('jsonSchemaDialect'))}",
                )
            )
        if self.old.version != self.new.version:
            document.append(
                ApiChange(
                    "",
                    "openapi-version-changed",
                    False,
                    "openapi",
                    f"{self.old.root['openapi']} -> {self.new.root['openapi']}",
                )
            )
        results.sort(key=lambda r: r.operation)
        return OpenApiDiff(tuple(results), tuple(document), self.old.root != self.new.root)

    def operation(
        self,
        key: str,
        o: dict[str, Any],
        n: dict[str, Any],
        o_item: dict[str, Any],
        n_item: dict[str, Any],
        o_template: str,
        n_template: str,
        flipped: bool,
    ) -> list[ApiChange]:
        out: list[ApiChange] = []
        add = self._adder(key, out)

        def records(records: list[_Rec], where: str) -> None:
            for r in records:
                path = _schema_path(r.path)
                add(r.kind, r.breaking, f"{where}: {path}" if path else where, r.detail)

        self.lifecycle.changed(o, n, add, "")
        self._operation_body(o, n, o_item, n_item, o_template, n_template, flipped, add, records, "")
        # Where the operation is served (servers.py): the document's, the path's or its own servers changed.
        for where, level, detail in server_changes(
            (self.old.root.get("servers"), o_item.get("servers"), o.get("servers")),
            (self.new.root.get("servers"), n_item.get("servers"), n.get("servers")),
            self._same,
        ):
            add(SERVERS_CHANGED, level == BREAKING, where, detail, level=level)
        softened = self.lifecycle.softened_by(o)
        if softened:
            # Read from the base: the revision's level softens nothing (lifecycle.py). The changes stay
            # reported, as warnings (they break no client that took the level at its word, and a person may
            # still want to see them), so a rule counting every change still derives its obligation.
            out = [
                ApiChange(
                    c.operation,
                    c.kind,
                    False,
                    c.where,
                    f"{c.detail}; softened: base stability {softened}".lstrip("; "),
                    c.weakens_security,
                    WARNING,
                )
                if c.breaking and c.kind not in LIFECYCLE_KINDS
                else c
                for c in out
            ]
        return out

    @staticmethod
    def _adder(key: str, out: list[ApiChange]) -> Any:
        def add(
            kind: str,
            breaking: bool,
            where: str = "",
            detail: str = "",
            weakens: bool = False,
            level: str = "",
        ) -> None:
            out.append(ApiChange(key, kind, breaking, where, detail, weakens, level))

        return add

    def _operation_body(
        self,
        o: dict[str, Any],
        n: dict[str, Any],
        o_item: dict[str, Any],
        n_item: dict[str, Any],
        o_template: str,
        n_template: str,
        flipped: bool,
        add: Any,
        records: Any,
        prefix: str,
    ) -> None:
        request = RESPONSE if flipped else REQUEST
        response = _FLIP[request]
        here = prefix.rstrip()
        if bool(o.get("deprecated")) != bool(n.get("deprecated")):
            add("operation-deprecated" if n.get("deprecated") else "operation-undeprecated", False, here)
        if o.get("operationId") != n.get("operationId"):
            add(
                "operation-id-changed",
                False,
                here,
                f"{quote(o.get('operationId'))} -> {quote(n.get('operationId'))}",
            )
        self._parameters(o, n, o_item, n_item, o_template, n_template, flipped, request, add, records, prefix)
        self._request_body(o.get("requestBody"), n.get("requestBody"), flipped, request, add, records, prefix)
        self._responses(o.get("responses"), n.get("responses"), flipped, response, add, records, prefix)
        # The document's security covers the requests the API receives, not the ones it sends.
        self._security(o, n, add, here, inherit=not flipped)
        self._callbacks(o.get("callbacks"), n.get("callbacks"), flipped, add, records, prefix)
        done = {
            "parameters",
            "requestBody",
            "responses",
            "security",
            "callbacks",
            "deprecated",
            "operationId",
        }
        for name in sorted((set(o) | set(n)) - done):
            if name in ANNOTATIONS or name.startswith("x-"):
                continue
            if not self._same(o.get(name), n.get(name)):
                add("operation-definition-changed", True, (prefix + name).strip(), f"{name} changed")

    # -- callbacks

    def _callbacks(self, o: Any, n: Any, flipped: bool, add: Any, records: Any, prefix: str) -> None:
        old = self.old.mapping(o, "callbacks", deref=False)
        new = self.new.mapping(n, "callbacks", deref=False)
        for name in new:
            if name not in old:
                add("callback-added", False, f"{prefix}callback {name}")
        for name, o_callback in old.items():
            where = f"{prefix}callback {name}"
            if name not in new:
                add("callback-removed", True, where)
                continue
            oc = self.old.mapping(o_callback, where)
            nc = self.new.mapping(new[name], where)
            for expression in nc:
                if expression not in oc and not expression.startswith("x-"):
                    add("callback-added", False, f"{where} {expression}")
            for expression, o_item in oc.items():
                if expression.startswith("x-"):
                    continue
                label = f"{where} {expression}"
                if expression not in nc:
                    add("callback-removed", True, label)
                    continue
                oi = self.old.path_item(o_item, label)
                ni = self.new.path_item(nc[expression], label)
                for method in METHODS:
                    if method not in oi and method not in ni:
                        continue
                    op_label = f"{label} {method.upper()}"
                    if method not in oi:
                        add("callback-added", False, op_label)
                    elif method not in ni:
                        add("callback-removed", True, op_label)
                    else:
                        # The API calls the client here: what it sends and accepts swap roles.
                        self._operation_body(
                            self.old.mapping(oi[method], op_label),
                            self.new.mapping(ni[method], op_label),
                            oi,
                            ni,
                            "",
                            "",
                            not flipped,
                            add,
                            records,
                            op_label + " ",
                        )


def diff_openapi(
    before: Any, after: Any, budget: Budget | None = None, options: DiffOptions | None = None
) -> OpenApiDiff:
    """Diff two sides of a change (each None, an object, or YAML/JSON text), grading changes under `options`
    (a derivation rule's; the defaults otherwise). Raises MalformedOpenApi, naming the side, for anything that
    must be refused."""
    graded = options or DiffOptions()
    return diff_openapi_graded(before, after, [graded], budget)[graded]


def diff_openapi_graded(
    before: Any, after: Any, gradings: list[DiffOptions], budget: Budget | None = None
) -> dict[DiffOptions, OpenApiDiff]:
    """The diff under each of `gradings`, the documents read once (their nodes counted once)."""
    budget = budget or Budget()
    documents: list[Document | None] = []
    for side, value in (("before", before), ("after", after)):
        try:
            documents.append(_load(value, budget))
        except MalformedOpenApi as error:
            raise MalformedOpenApi(f"{side}: {error}") from None
    old, new = documents
    if old is None and new is None:
        return {options: OpenApiDiff((), (), False) for options in gradings}
    # An added (or removed) document is compared with an empty one: every operation in it is added (removed).
    present = new or old
    assert present is not None
    empty = Document({"openapi": present.root["openapi"]})
    out: dict[DiffOptions, OpenApiDiff] = {}
    for options in gradings:
        if options in out:
            continue
        differ = _Differ(old or empty, new or empty, budget, options)
        try:
            out[options] = differ.diff()
        except RecursionError:  # pragma: no cover - the depth caps above are meant to make this unreachable
            raise MalformedOpenApi("the documents nest too deeply to compare") from None
    return out
