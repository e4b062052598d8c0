"""git, gh and glab commands: which pushes and merges are releases, and which refs they act on.

A push is read refspec by refspec (an implicit destination is asked of `Repository`) and each update is
matched against the patterns spelled out, so `git push` on main meets a pattern for `git push origin main`.
A merge acts on the commits it names; `gh pr merge` and `glab mr merge` on the pull request's head. git
aliases are looked up and gh aliases followed; git configuration or environment that changes what git runs
is hidden.
"""

from __future__ import annotations

import re
import shlex

from .releases import Release, Repository, _change_directory, _located, _replace
from .shell_lexer import Word, render

# Variables that make git read another repository or other configuration (aliases, hooks, push refspecs).
_GIT_ENVIRONMENT = re.compile(
    r"GIT_(?:DIR|WORK_TREE|COMMON_DIR|NAMESPACE|CONFIG\w*|OBJECT_DIRECTORY"
    r"|ALTERNATE_OBJECT_DIRECTORIES|INDEX_FILE)\+?="
)
# git configuration that changes what a later git command runs or where it pushes.
_GIT_BEHAVIOUR_KEYS = re.compile(
    r"(?i)alias\..+|core\.hookspath|remote\..+\.push|push\.default|include(?:if)?\..*"
)
_GIT_CONFIG_READS = frozenset(
    {
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--list",
        "-l",
        "get",
        "list",
        "--show-origin",
        "--name-only",
    }
)
_GIT_VALUE_GLOBALS = frozenset(
    {
        "-C",
        "-c",
        "--git-dir",
        "--work-tree",
        "--namespace",
        "--config-env",
        "--super-prefix",
        "--attr-source",
        "--exec-path",
    }
)
# git's own commands: a subcommand outside this list may be an alias, which is looked up.
_GIT_COMMANDS = frozenset(
    """
add am annotate apply archive bisect blame branch bundle cat-file check-attr check-ignore check-mailmap
check-ref-format checkout checkout-index cherry cherry-pick citool clean clone column commit commit-graph
commit-tree config count-objects credential describe diff diff-files diff-index diff-tree difftool
fast-export fast-import fetch fetch-pack filter-branch fmt-merge-msg for-each-ref for-each-repo format-patch
fsck gc get-tar-commit-id grep gui hash-object help hook index-pack init instaweb interpret-trailers log
ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge merge-base merge-file merge-index merge-tree
mergetool mktag mktree multi-pack-index mv name-rev notes pack-objects pack-redundant pack-refs
patch-id prune prune-packed pull push range-diff read-tree rebase reflog remote repack replace
request-pull rerere reset restore rev-list rev-parse revert rm send-email send-pack shortlog show
show-branch show-index show-ref sparse-checkout stage stash status stripspace submodule switch
symbolic-ref tag unpack-file unpack-objects update-index update-ref update-server-info var verify-commit
verify-pack verify-tag version whatchanged worktree write-tree lfs
""".split()
)


class GitAnalysis:
    """The git, gh and glab part of the release analyser (`release_analysis._Analyser` inherits it).

    It relies on the analyser for matching (`matches`, `could_match`), for what it reports (`hide`,
    `release`) and for the commands an alias runs (`nested`, `simple`, `generic`).
    """

    repository: Repository
    git_environment: bool  # an earlier command exported GIT_DIR, GIT_CONFIG_* or the like

    # Over the complexity gate: the hook issue rewrites this analysis; the restructuring moved it unchanged.
    def git(  # noqa: C901
        self,
        words: list[Word],
        assignments: list[Word],
        directory: str | None,
        taint: tuple[str, ...],
    ) -> None:
        index = 1
        configured = self.git_environment or any(_GIT_ENVIRONMENT.match(w.lead) for w in assignments)
        dynamic_location = False
        git_options: list[str] = []
        config_options: list[str] = []
        while index < len(words) and words[index].text.startswith("-"):
            word = words[index]
            option, has_inline, inline = word.text.partition("=")
            takes_value = option in _GIT_VALUE_GLOBALS and not has_inline and option != "--exec-path"
            value = words[index + 1] if takes_value and index + 1 < len(words) else None
            value_text = value.text if value else inline
            value_dynamic = value.dynamic if value else word.dynamic
            if option == "-C":
                if value_dynamic:
                    dynamic_location = True
                elif value_text:
                    directory = _change_directory("cd", [Word(value_text)], directory)
            elif option in ("--git-dir", "--work-tree"):
                dynamic_location = dynamic_location or value_dynamic
                git_options.append(f"{option}={value_text}")
            elif option in ("-c", "--config-env"):
                configured = True
                config_options += [option, value_text]
            index += 2 if takes_value else 1
        if index >= len(words):
            return
        sub = words[index]
        args = words[index + 1 :]
        if sub.dynamic:
            self.hide("a git subcommand computed at run time", words)
            return
        if any(value.lower().startswith("alias.") for value in config_options[1::2]):
            self.hide("git -c alias", words)
            return
        if sub.text not in _GIT_COMMANDS:
            if directory is None or dynamic_location:
                self.hide("a git alias in a directory the hook cannot follow", words)
                return
            expansion = self.repository.git_alias(directory, tuple(git_options + config_options), sub.text)
            if expansion is not None:
                self.git_alias(expansion, words[:index], args, directory, taint)
                return
        if (
            sub.text == "config"
            and not any(w.text in _GIT_CONFIG_READS for w in args)
            and any(_GIT_BEHAVIOUR_KEYS.fullmatch(w.text) for w in args if not w.text.startswith("-"))
        ):
            self.hide("git config that changes what git runs", words)
            return
        text = render(words)
        location = Release(text, directory=directory, git_options=tuple(git_options))
        if sub.text == "push":
            release = self.git_push(words, args, location)
        elif sub.text == "merge":
            release = self.git_merge(words, args, location)
        elif self.matches(text):
            release = _located(location, directory)
        else:
            if self.could_match(words, verb_positions=0):
                self.hide("an argument computed at run time", words)
            return
        if release is None:
            return
        if release.unresolved is None and (dynamic_location or directory is None):
            release = _replace(release, unresolved="the command runs in a directory the hook cannot follow")
        if configured:
            construct = "git -c" if config_options else "GIT_* environment"
            self.release(Release(text), (*taint, construct), words)
            return
        self.release(release, taint, words)

    def git_alias(
        self, expansion: str, prefix: list[Word], args: list[Word], directory: str, taint: tuple[str, ...]
    ) -> None:
        if expansion.startswith("!"):
            script = " ".join([expansion[1:], *(w.text if w.dynamic else shlex.quote(w.text) for w in args)])
            self.nested(script, directory, taint, "git alias")
            return
        try:
            expanded = [Word(part) for part in shlex.split(expansion)]
        except ValueError:
            self.hide("an unreadable git alias", expansion)
            return
        self.simple([*prefix, *expanded, *args], [], False, False, directory, (*taint, "git alias"))

    # Over the complexity gate: the hook issue rewrites this analysis; the restructuring moved it unchanged.
    def git_push(  # noqa: C901
        self, words: list[Word], args: list[Word], location: Release
    ) -> Release | None:
        value_options = {"--repo", "-o", "--push-option", "--receive-pack", "--exec"}
        positionals: list[Word] = []
        every_branch = delete = False
        index = 0
        while index < len(args):
            word = args[index]
            text = word.text
            if text == "--":
                positionals += args[index + 1 :]
                break
            if text.startswith("-") and not word.dynamic:
                if text in value_options:
                    index += 1
                elif text in ("--all", "--branches", "--mirror"):
                    every_branch = True
                elif text == "--delete" or (not text.startswith("--") and "d" in text[1:]):
                    delete = True
            else:
                positionals.append(word)
            index += 1
        remote = positionals[0].text if positionals else "origin"
        refspecs = positionals[1:]
        text = render(words)
        if any(word.dynamic for word in refspecs):
            if self.matches(text) or self.could_match(words, verb_positions=0):
                self.hide("a push target computed at run time", words)
            return None
        if every_branch:
            return (
                _replace(
                    location, unresolved="it pushes every branch at once; push the protected branch by name"
                )
                if self.matches(text)
                else None
            )
        pushes: list[tuple[str | None, str]] = []  # (source ref or None for a deletion, destination)
        unknown: str | None = None
        directory = location.directory
        if not refspecs:
            destinations = (
                self.repository.push_destinations(directory, location.git_options)
                if directory is not None
                else None
            )
            if destinations is None:
                unknown = (
                    "the hook cannot tell which branch it updates (not a git repository, not on a "
                    "branch, or push refspecs are configured); name the branch"
                )
            pushes = [("HEAD", destination) for destination in destinations or []]
        for spec in refspecs:
            value = spec.text[1:] if spec.text.startswith("+") else spec.text
            source, colon, destination = value.partition(":")
            if delete:
                source, destination = "", value
            elif not colon:
                destination = source
            if "*" in value:
                unknown = "a wildcard refspec can update a protected branch; name the branch"
                continue
            if destination in ("HEAD", "@") or (not colon and source in ("HEAD", "@")):
                current = (
                    self.repository.current_branch(directory, location.git_options)
                    if directory is not None
                    else None
                )
                if current is None:
                    unknown = (
                        f"the hook cannot tell which branch {spec.text} updates (not a git repository, "
                        "or not on a branch)"
                    )
                    continue
                destination = current
            pushes.append((source or None, destination or source))
        gated = [push for push in pushes if self.matches(_explicit_push(remote, *push))]
        if not gated and self.matches(text):
            gated = pushes
        if unknown is not None and (gated or not pushes or self.matches(text)):
            return _replace(location, unresolved=unknown)
        if not gated:
            return None
        if any(source is None for source, _ in gated):
            return _replace(location, unresolved="it deletes a protected branch: there is no commit to judge")
        return _replace(location, refs=tuple(dict.fromkeys(source for source, _ in gated if source)))

    def git_merge(self, words: list[Word], args: list[Word], location: Release) -> Release | None:
        value_options = {"-m", "-F", "--file", "-s", "--strategy", "-X", "--strategy-option", "--into-name"}
        if not self.matches(render(words)):
            return None
        refs: list[str] = []
        index = 0
        while index < len(args):
            word = args[index]
            if word.text in ("--abort", "--quit"):
                return None  # nothing advances
            if word.text == "--continue":
                refs.append("MERGE_HEAD")
            elif word.text.startswith("-") and not word.dynamic:
                index += 1 if word.text in value_options else 0
            elif word.dynamic:
                self.hide("a merged commit computed at run time", words)
                return None
            else:
                refs.append(word.text)
            index += 1
        return _replace(location, refs=tuple(refs))

    def forge(self, name: str, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        """`gh pr merge` and `glab mr merge`: the merged commit is the pull request's head."""
        args = [word.text for word in words[1:3]]
        noun = "pr" if name == "gh" else "mr"
        if name == "gh" and args[:2] == ["alias", "set"]:
            self.gh_alias(words, directory, taint)
            return
        text = render(words)
        if args != [noun, "merge"] or not self.matches(text):
            self.generic(words, directory, taint)
            return
        if name == "gh":
            value_options = {
                "-b",
                "--body",
                "-F",
                "--body-file",
                "-t",
                "--subject",
                "-A",
                "--author-email",
                "--match-head-commit",
                "-R",
                "--repo",
            }
            head_option = "--match-head-commit"
        else:
            value_options = {"-m", "--message", "--squash-message", "--sha", "-R", "--repo"}
            head_option = "--sha"
        head: Word | None = None
        target: Word | None = None
        elsewhere = False
        rest = words[3:]
        index = 0
        while index < len(rest):
            word = rest[index]
            option, has_inline, inline = word.text.partition("=")
            elsewhere = elsewhere or option in ("-R", "--repo")
            if option == head_option:
                head = (
                    Word(inline, word.dynamic)
                    if has_inline
                    else (rest[index + 1] if index + 1 < len(rest) else None)
                )
            if option in value_options and not has_inline:
                index += 2
                continue
            if not word.text.startswith("-") and target is None:
                target = word
            index += 1
        if (head is not None and head.dynamic) or (head is None and target is not None and target.dynamic):
            self.hide("a merged pull request computed at run time", words)
            return
        release = Release(text, directory=directory)
        if head is not None:
            release = _replace(release, refs=(head.text,))
        elif elsewhere:
            release = _replace(
                release,
                unresolved=f"it merges in another repository; add {head_option} "
                "<full commit id> so the merge is bound to the commit the gate judged",
            )
        elif target is not None:
            value = target.text
            if value.isdigit() or value.startswith("#") or "://" in value:
                release = _replace(
                    release,
                    unresolved=f"{value} names a {noun.upper()}, not a commit; add "
                    f"{head_option} <full commit id> so the merge is bound to the commit the "
                    "gate judged",
                )
            else:
                release = _replace(release, refs=(value,))
        self.release(_located(release, directory), taint, words)

    def gh_alias(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        positionals = [w for w in words[3:] if not w.text.startswith("-")]
        shell = any(w.text in ("-s", "--shell") for w in words[3:])
        if len(positionals) < 2:
            return
        expansion = positionals[1]
        if expansion.dynamic:
            self.hide("a gh alias computed at run time", words)
        elif shell or expansion.text.startswith("!"):
            self.nested(expansion.text.lstrip("!"), directory, taint, "gh alias")
        else:
            try:
                expanded = [Word(part) for part in shlex.split(expansion.text)]
            except ValueError:
                self.hide("an unreadable gh alias", words)
                return
            self.simple([Word("gh"), *expanded], [], False, False, directory, (*taint, "gh alias"))


def _explicit_push(remote: str, source: str | None, destination: str) -> str:
    """`git push` with its refspec spelled out, so an implicit destination meets the patterns too."""
    refspec = f"{source or ''}:{destination}"
    return f"git push {shlex.quote(remote)} {shlex.quote(refspec)}"
