"""The project's state as a decision read (`GET .../decision`) takes it: the folded configuration, policies
and revocations of a project chain that verified, held per process while the chain's head is unchanged.

A hook polls its candidate's decision; the project's chain changes far more rarely (configuration, policies,
principals). So once a whole project chain has been read and verified, a decision read compares only its
HEAD (one strongly consistent item) with the head that chain had, and reuses the folded state while the two
are equal. Nothing is held until a decision read has read a project in full; after that:

- a head with another seq or hash (a newer append, or one that moved backwards, or another hash at the same
  seq) reads and verifies the whole chain and replaces what is held;
- a HEAD that cannot be read, or is missing, is STATE_UNAVAILABLE (the held chain stays held, and is used
  again only once a HEAD equal to its head is read): nothing held is ever used without a head that equals it;
- where the witness is read (every read locally, release paths everywhere), a checkpoint the held chain does
  not contain (a newer seq, or another hash at its seq), or a tamper finding, reads and verifies in full,
  which names the cut.

What this gives up, deliberately: an event or fact of the project chain edited behind an unchanged head is
not seen by decision reads that reuse the held state. Checking the whole, unchanged project chain is the
write paths' job (every route that appends, recorded decisions included, reads and verifies the project's
chain in full and refuses on a chain that fails) and, from the next issue, the scheduled verifier's. The
candidate's own chain is still read and verified in full on every decision read. Only chains that verified
complete are held; a chain that fails is read again each time."""

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..decision import Finding, finding
from ..errors import StoreUnavailable
from ..ports import StreamRef
from ..state import ProjectState
from .chain import Chain

MAX_PROJECTS = 64


@dataclass(frozen=True)
class HeldProject:
    """A project chain that verified complete: its head, every event's hash (what a checkpoint is compared
    with) and its facts, parsed (shared read-only by every decision that reuses them)."""

    seq: int
    hash: str
    hashes: tuple[str, ...]
    facts: list[dict[str, Any]]

    def same_head(self, head: dict[str, Any]) -> bool:
        """Equal seq and hash, exactly: anything else (a later, an earlier or a rewritten head, a value of
        another type) is a change."""
        seq = head.get("seq")
        return type(seq) is int and seq == self.seq and head.get("hash") == self.hash

    def contains(self, checkpoint: dict[str, Any]) -> bool:
        """The checkpoint names an event of this chain, at its seq and with its hash."""
        try:
            seq = int(checkpoint["seq"])
        except (KeyError, TypeError, ValueError):
            return False
        return 1 <= seq <= len(self.hashes) and self.hashes[seq - 1] == checkpoint.get("hash")


class ProjectCache:
    """The verified project chains a process holds for its decision reads, the least recently used dropped
    beyond `max_projects`. One per process (a Lambda container, a local server), built by the composition
    root and handed to the gate; safe to share between threads."""

    def __init__(self, max_projects: int = MAX_PROJECTS) -> None:
        if max_projects < 1:
            raise ValueError("max_projects must be at least 1")
        self.max_projects = max_projects
        self._held: OrderedDict[str, HeldProject] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, project: str) -> HeldProject | None:
        with self._lock:
            held = self._held.get(project)
            if held is not None:
                self._held.move_to_end(project)
            return held

    def put(self, project: str, held: HeldProject) -> None:
        with self._lock:
            self._held[project] = held
            self._held.move_to_end(project)
            while len(self._held) > self.max_projects:
                self._held.popitem(last=False)

    def drop(self, project: str) -> None:
        with self._lock:
            self._held.pop(project, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)


def _unavailable(project: str) -> tuple[ProjectState, list[Finding]]:
    return ProjectState(project, []), [
        finding("STATE_UNAVAILABLE", "the project's configuration could not be read")
    ]


def _compare(chain: Chain, project: str, held: HeldProject, release: bool) -> str:
    """What the project's HEAD says of the held chain: "same", "changed", "missing" or "unreadable". Where
    the witness is read (locally, and on release paths), it is read before HEAD, so a checkpoint of a write
    committed in between is never mistaken for one the held chain lacks."""
    ref = StreamRef(project)
    checkpoint = None
    if chain.witness is not None and (release or chain.reads_witness):
        try:
            if chain.witness.tampered(ref) is not None:
                return "changed"  # read in full: the verification names the finding
            checkpoint = chain.witness.newest(ref)
        except Exception:  # a witness that cannot answer: never answered from what is held
            return "unreadable"
    try:
        head = chain.store.load_head(ref)
    except StoreUnavailable:
        return "unreadable"
    if head is None:
        return "missing"
    if not held.same_head(head):
        return "changed"
    if checkpoint is not None and not held.contains(checkpoint):
        return "changed"
    return "same"


def project_for_decision(
    chain: Chain, project: str, cache: ProjectCache | None, release: bool = False
) -> tuple[ProjectState, list[Finding]]:
    """The project's state for a decision read, with the findings of reading it (never a refusal). Without a
    cache, or with nothing held for the project, the whole chain is read and verified; with a held chain, its
    HEAD first (see the module's docstring). `release`: the witness is read wherever the gate runs."""
    held = cache.get(project) if cache is not None else None
    if cache is not None and held is not None:
        head = _compare(chain, project, held, release)
        if head == "same":
            # A fresh state over the shared facts: its memos belong to this one decision.
            return ProjectState(project, held.facts), []
        if head != "changed":  # a HEAD that cannot be read or is missing: never answered from what is held
            return _unavailable(project)
    try:
        stream = chain.read(StreamRef(project), release=release)
    except StoreUnavailable:
        stream = None
    if stream is None or not stream.facts:
        if cache is not None:
            cache.drop(project)
        return _unavailable(project)
    state = ProjectState.from_facts(project, stream.facts)
    findings: list[Finding] = []
    if not stream.complete:
        findings.append(
            finding(
                "EVIDENCE_QUERY_INCOMPLETE",
                "the project's configuration and policies took "
                "more pages to read than the budget allows; nothing unread may count",
            )
        )
    try:
        check = chain.verify(stream)
    except StoreUnavailable as error:
        findings.append(
            finding("STATE_UNAVAILABLE", f"the project's audit chain cannot be verified: {error}")
        )
    else:
        if not check.valid:
            findings.append(
                finding(
                    "STATE_TAMPERED",
                    f"the project's audit chain fails at seq {check.first_bad_seq}: {check.reason}",
                )
            )
    if cache is not None:
        head_hash = stream.head_hash
        if findings or stream.head is None or not isinstance(head_hash, str):
            cache.drop(project)
        else:
            hashes = tuple(str(event["hash"]) for event in stream.events)
            cache.put(project, HeldProject(stream.seq, head_hash, hashes, state.facts))
    return state, findings
