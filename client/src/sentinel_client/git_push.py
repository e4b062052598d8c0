"""Which refs a `git push` (or `git send-pack`) updates, and from which commits, the way git decides it.

Pure: the repository's facts (its config with every source the command sees, HEAD, its refs) come in as
`RepoFacts`. A push's destinations come from its refspecs, else `--all`/`--branches`/`--mirror`/`--tags`,
else `remote.<name>.push`, else `push.default` (`simple` by default; `matching` and `:` push every branch
that exists on both sides, taken here as every local branch). A destination is completed the way git does
(`heads/main` and `main` are `refs/heads/main`). What cannot be known is said, never guessed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .releases import RepoFacts
from .shell_lexer import Word

_VALUE_OPTIONS = frozenset({"--repo", "-o", "--push-option", "--receive-pack", "--exec"})
# git push's long options: git accepts any unambiguous prefix (`--mir` is --mirror, `--dry` --dry-run), and
# `--no-` before a boolean one negates it.
PUSH_OPTIONS = (
    "all",
    "branches",
    "mirror",
    "delete",
    "tags",
    "follow-tags",
    "dry-run",
    "porcelain",
    "force",
    "force-with-lease",
    "force-if-includes",
    "repo",
    "set-upstream",
    "thin",
    "quiet",
    "verbose",
    "progress",
    "prune",
    "no-verify",
    "verify",
    "recurse-submodules",
    "atomic",
    "push-option",
    "ipv4",
    "ipv6",
    "signed",
    "receive-pack",
    "exec",
)


def expand_long(option: str, known: tuple[str, ...]) -> str:
    """The long option git reads for `option` (a unique prefix of a known one, or `--no-` and one); as
    written when it is neither."""
    name = option[2:]
    for negated in (False, True):
        if negated:
            if not name.startswith("no-"):
                break
            name = name[3:]
        matches = [k for k in known if k == name] or [k for k in known if k.startswith(name)]
        if len(matches) == 1:
            return ("--no-" if negated else "--") + matches[0]
    return option


_EVERYTHING = "it mirrors every ref, deleting what is absent locally"


@dataclass
class PushPlan:
    """The updates a push makes: (source revision, or None for a deletion; full destination ref)."""

    updates: list[tuple[str | None, str]] = field(default_factory=list)
    unknown: str | None = None  # why some destination cannot be known
    dry_run: bool = False
    remote: str = "origin"
    explicit: bool = True  # every refspec was on the command line


@dataclass
class _Options:
    positionals: list[Word] = field(default_factory=list)
    delete: bool = False
    dry_run: bool = False
    every: str | None = None  # "branches", "mirror"
    tags: bool = False
    prune: bool = False
    repo: str | None = None


def _read_options(args: Sequence[Word]) -> _Options:
    found = _Options()
    index = 0
    while index < len(args):
        word = args[index]
        text = word.text
        index += 1
        if word.dynamic or not text.startswith("-") or text == "-":
            found.positionals.append(word)
            continue
        if text == "--":
            found.positionals += args[index:]
            break
        option, has_value, value = text.partition("=")
        if option.startswith("--"):
            option = expand_long(option, PUSH_OPTIONS)
            if option == "--no-dry-run":
                found.dry_run = False
            if option in _VALUE_OPTIONS and not has_value:
                value = args[index].text if index < len(args) else ""
                index += 1
            if option == "--repo":
                found.repo = value
            found.delete = found.delete or option == "--delete"
            found.dry_run = found.dry_run or option == "--dry-run"
            found.tags = found.tags or option == "--tags"
            found.prune = found.prune or option == "--prune"
            if option in ("--all", "--branches"):
                found.every = found.every or "branches"
            if option == "--mirror":
                found.every = "mirror"
            continue
        for position, letter in enumerate(text[1:], start=1):
            if letter == "o":  # -o VALUE or -oVALUE: the rest is the push option
                index += 0 if text[position + 1 :] else 1
                break
            found.delete = found.delete or letter == "d"
            found.dry_run = found.dry_run or letter == "n"
    return found


def _branch(facts: RepoFacts) -> str | None:
    return (
        facts.head.removeprefix("refs/heads/")
        if facts.head and facts.head.startswith("refs/heads/")
        else None
    )


def default_remote(facts: RepoFacts | None) -> str:
    branch = _branch(facts) if facts else None
    if facts is None:
        return "origin"
    for key in (f"branch.{branch}.pushremote", "remote.pushdefault", f"branch.{branch}.remote"):
        if (branch or not key.startswith("branch.")) and facts.get(key):
            return facts.get(key) or "origin"
    return "origin"


def _configured_refspecs(facts: RepoFacts, remote: str, options: _Options) -> tuple[list[str], str | None]:
    """The refspecs a push without any on its command line uses; (refspecs, why unknown)."""
    if options.every == "mirror" or (facts.get(f"remote.{remote}.mirror") or "").lower() in (
        "true",
        "yes",
        "on",
        "1",
    ):
        return [], _EVERYTHING
    specs: list[str] = []
    if options.every == "branches":
        specs.append("refs/heads/*:refs/heads/*")
    if options.tags:
        specs.append("refs/tags/*:refs/tags/*")
    if specs:
        return specs, None
    configured = facts.config.get(f"remote.{remote}.push")
    if configured:
        return list(configured), None
    mode = (facts.get("push.default") or "simple").lower()
    branch = _branch(facts)
    merge = facts.get(f"branch.{branch}.merge") if branch else None
    if mode == "nothing":
        return [], None
    if mode == "matching":
        return [":"], None
    if branch is None:
        return [], None  # git refuses to push a detached HEAD without a refspec
    if mode in ("upstream", "tracking"):
        return ([f"HEAD:{merge}"] if merge else []), None
    # `simple` and `current`: the branch of the same name (and, to be safe, its upstream when that differs).
    return [f"HEAD:refs/heads/{branch}"] + ([f"HEAD:{merge}"] if merge and mode == "simple" else []), None


def _full_destinations(destination: str, source: str, facts: RepoFacts | None) -> list[str]:
    """Every ref an unqualified destination can name. Git first matches it against the *remote's* refs,
    which the hook cannot list: `git push origin TAG:main` updates the remote's branch `main` when it has
    one, whatever the source is. So an unqualified name is judged as the branch, and also as a tag when the
    source is a tag."""
    if destination.startswith("refs/"):
        return [destination]
    if destination.startswith(("heads/", "tags/", "remotes/")):
        return ["refs/" + destination]
    branch = f"refs/heads/{destination}"
    if facts is not None and (source.startswith("refs/tags/") or f"refs/tags/{source}" in facts.refs):
        if f"refs/heads/{source}" not in facts.refs:
            return [branch, f"refs/tags/{destination}"]
    return [branch]


def _expand(spec: str, options: _Options, facts: RepoFacts | None, plan: PushPlan, stale: bool) -> None:
    value = spec[1:] if spec.startswith("+") else spec
    if value.startswith("^"):
        return  # a negative refspec only removes
    branches = [ref for ref in (facts.refs if facts else ()) if ref.startswith("refs/heads/")]
    if value == ":":
        if facts is None or stale:
            plan.unknown = "a matching push (`:`) updates every branch that exists on both sides"
        plan.updates += [(ref, ref) for ref in branches]
        return
    source, colon, destination = value.partition(":")
    if options.delete:
        source, destination = "", value
    elif not colon or not destination:
        destination = source
    if "*" in value:
        if facts is None or stale:
            plan.unknown = f"the wildcard refspec {spec} updates refs the hook cannot list"
            return
        pattern = re.compile(re.escape(source).replace(r"\*", "(.*)") + "$")
        for ref in facts.refs:
            match = pattern.match(ref)
            if match:
                plan.updates.append((ref, destination.replace("*", match.group(1), 1)))
        if options.prune:
            plan.unknown = f"--prune with {spec} deletes remote refs the hook cannot list"
        return
    if destination in ("HEAD", "@") or (not colon and source in ("HEAD", "@")):
        branch = _branch(facts) if facts is not None and not stale else None
        if branch is None:
            plan.unknown = (
                f"the hook cannot tell which branch {spec} updates (not a git repository, or not on a branch)"
            )
            return
        destination = f"refs/heads/{branch}"
    if not source:
        plan.updates += [(None, ref) for ref in _full_destinations(destination, destination, facts)]
        return
    plan.updates += [(source, ref) for ref in _full_destinations(destination, source, facts)]


def plan_push(args: Sequence[Word], facts: RepoFacts | None, stale: bool = False) -> PushPlan:
    """The updates of `git push ARGS`. `stale`: an earlier command in the same line changed the repository,
    so HEAD, branches and config as read now are not what the push will see."""
    options = _read_options(args)
    plan = PushPlan(dry_run=options.dry_run)
    positionals = options.positionals
    # A repository argument wins over --repo (git's documentation), and refspecs follow it.
    if positionals:
        plan.remote = positionals[0].text
    elif options.repo is not None:
        plan.remote = options.repo
    elif facts is not None and not stale:
        plan.remote = default_remote(facts)
    refspecs = [word.text for word in positionals[1:]]
    if not refspecs or options.every or options.tags:
        plan.explicit = False
        if facts is None or stale:
            plan.unknown = (
                "the hook cannot tell which branches it updates (not a git repository, or the command "
                "changes the repository first); name the branch: git push origin SOURCE:BRANCH"
            )
        else:
            configured, why = _configured_refspecs(facts, plan.remote, options)
            refspecs += configured
            plan.unknown = why
    for spec in refspecs:
        _expand(spec, options, facts, plan, stale)
    return plan


def is_protected(ref: str, protected: Sequence[str]) -> bool:
    """A full ref name against the protected patterns, case-insensitively."""
    return any(fnmatch.fnmatchcase(ref.lower(), pattern.lower()) for pattern in protected)
