"""git commands: which pushes and merges are releases, at which commits, and what git would run for them.

A push is resolved the way git resolves it, with every config source the command can see (its `-c` and
`--config-env` options, the `GIT_CONFIG_*` variables it sets or inherits, the files they name and their
includes): git itself is asked (`Repository.facts`) with the command's own options and environment, and
`git_push.plan_push` turns refspecs, `push.default`, `remote.<name>.push`, `--all` and `--mirror` into the
refs it updates. Aliases are resolved from the same config. Configuration that makes git run a program
(hooks, fsmonitor, ssh, pager, external diff, filters, credential helpers, includes, `!` aliases) set by
the command is hidden, never judged.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence

from .git_push import PUSH_OPTIONS, _full_destinations, expand_long, is_protected, plan_push
from .releases import Release, RepoFacts, _change_directory, _located, _replace
from .shell_lexer import Word, render

# Variables that change which repository or configuration git reads.
GIT_ENVIRONMENT = re.compile(
    r"(?:GIT_(?:DIR|WORK_TREE|COMMON_DIR|NAMESPACE|CONFIG\w*|OBJECT_DIRECTORY|ALTERNATE_OBJECT_DIRECTORIES"
    r"|INDEX_FILE|CEILING_DIRECTORIES|DISCOVERY_ACROSS_FILESYSTEM)|HOME|XDG_CONFIG_HOME)"
)
# Variables that make git run a program of their choosing; harmless values are allowed.
_GIT_PROGRAM_VARIABLES = re.compile(
    r"GIT_(?:SSH|SSH_COMMAND|EXTERNAL_DIFF|PAGER|EDITOR|SEQUENCE_EDITOR|ASKPASS|EXEC_PATH|PROXY_COMMAND"
    r"|TEMPLATE_DIR|CONFIG_PARAMETERS|TRACE2_\w+)|SSH_ASKPASS|EDITOR|VISUAL|PAGER"
)
# Config keys whose value git runs (or that make it read more config): setting one is hidden.
CODE_KEYS = re.compile(
    r"(?i)core\.(?:hookspath|fsmonitor|sshcommand|pager|editor|askpass|gitproxy|alternaterefscommand)"
    r"|sequence\.editor|pager\..+|diff\.external|diff\..+\.(?:textconv|command)|merge\..+\.driver"
    r"|filter\..+|credential(?:\..+)?\.helper|include\.path|includeif\..+|alias\..+|gpg\.(?:.+\.)?program"
    r"|init\.templatedir|protocol\..*allow|remote\..+\.(?:receivepack|uploadpack|vcs)|uploadpack\..+hook"
    r"|difftool\..+\.cmd|mergetool\..+\.cmd|sendemail\..+cmd|.*\.sshcommand|http\..*cookiefile|core\.worktree"
)
_HARMLESS_VALUES = frozenset(
    {"", "cat", "true", "false", ":", "less", "more", "less -r", "less -R", "vi", "vim"}
)
# Options that make git run a program of the command's choosing, per subcommand.
_PROGRAM_OPTIONS: dict[str, frozenset[str]] = {
    "push": frozenset({"--receive-pack", "--exec"}),
    "send-pack": frozenset({"--receive-pack", "--exec"}),
    "fetch": frozenset({"--upload-pack"}),
    "pull": frozenset({"--upload-pack"}),
    "ls-remote": frozenset({"--upload-pack"}),
    "fetch-pack": frozenset({"--upload-pack", "--exec"}),
    "clone": frozenset({"--upload-pack", "-u", "--template", "--config", "-c"}),
    "init": frozenset({"--template"}),
    "archive": frozenset({"--exec"}),
    "difftool": frozenset({"-x", "--extcmd"}),
    "mergetool": frozenset(),
}
_VALUE_GLOBALS = frozenset(
    {
        "-C",
        "-c",
        "--git-dir",
        "--work-tree",
        "--namespace",
        "--config-env",
        "--super-prefix",
        "--attr-source",
        "--list-cmds",
    }
)
# git's own commands: anything else may be an alias, which is resolved.
GIT_COMMANDS = frozenset(
    """
add am annotate apply archive bisect blame branch bugreport bundle cat-file check-attr check-ignore
check-mailmap check-ref-format checkout checkout-index cherry cherry-pick citool clean clone column
commit commit-graph commit-tree config count-objects credential describe diagnose diff diff-files
diff-index diff-tree difftool fast-export fast-import fetch fetch-pack filter-branch fmt-merge-msg
for-each-ref for-each-repo format-patch fsck gc get-tar-commit-id grep gui hash-object help hook
index-pack init instaweb interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit
maintenance merge merge-base merge-file merge-index merge-tree mergetool mktag mktree
multi-pack-index mv name-rev notes pack-objects pack-redundant pack-refs patch-id prune prune-packed
pull push range-diff read-tree rebase reflog remote repack replace request-pull rerere reset restore
rev-list rev-parse revert rm send-email send-pack shortlog show show-branch show-index show-ref
sparse-checkout stage stash status stripspace submodule switch symbolic-ref tag unpack-file
unpack-objects update-index update-ref update-server-info var verify-commit verify-pack verify-tag
version whatchanged worktree write-tree lfs
""".split()
)
# Commands that leave branches, HEAD and config as they were: a later push in the line still sees them.
# Subcommands with a judgement of their own wherever they run (pushes, ref updates, configuration).
_JUDGED_ELSEWHERE = frozenset({"push", "send-pack", "update-ref", "branch", "fetch", "config"})


def _another_repository(options: Sequence[str], git_env: Mapping[str, str], facts: RepoFacts | None) -> bool:
    """The command works on a bare repository, or on a git directory or work tree named for it."""
    if facts is not None and (facts.get("core.bare") or "").lower() == "true":
        return True
    if any(o.startswith(("--git-dir", "--work-tree", "--bare")) for o in options):
        return True
    return "GIT_DIR" in git_env or "GIT_WORK_TREE" in git_env


_KEEPS_STATE = frozenset(
    """
status log show diff rev-parse ls-files ls-tree cat-file grep blame describe shortlog show-ref
for-each-ref rev-list add rm mv restore diff-tree diff-files diff-index merge-base name-rev help
version var check-ignore check-attr count-objects fsck verify-commit whatchanged format-patch
archive ls-remote stage apply clean gc prune stripspace hash-object push send-pack cherry range-diff
annotate show-branch check-ref-format
""".split()
)
_CONFIG_READS = frozenset(
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
        "--get-color",
        "--get-colorbool",
    }
)


def _environment_problem(env: dict[str, str | None]) -> str | None:
    """Why the environment a git command gets makes git run a program of the command's choosing."""
    for name, value in env.items():
        if _GIT_PROGRAM_VARIABLES.fullmatch(name) and (
            value is None or value.strip() not in _HARMLESS_VALUES
        ):
            return f"{name} makes git run a program"
        if name.startswith("GIT_CONFIG_KEY_") and harmful(
            value or "", env.get("GIT_CONFIG_VALUE_" + name[15:])
        ):
            return f"GIT_CONFIG_KEY sets {value}, which makes git run a program"
    return None


def _global_options(
    words: list[Word], directory: str | None
) -> tuple[int, list[str], str | None, bool, str | None]:
    """git's global options: (index of the subcommand, options for git, directory, whether the repository
    is computed at run time, why they make git run a program)."""
    index, options, dynamic = 1, [], False
    while index < len(words) and words[index].text.startswith("-"):
        word = words[index]
        option, has_inline, inline = word.text.partition("=")
        takes_value = option in _VALUE_GLOBALS and not has_inline
        value = words[index + 1] if takes_value and index + 1 < len(words) else Word(inline, word.dynamic)
        if option == "-C":
            directory = None if value.dynamic else _change_directory("cd", [value], directory)
        elif option in ("-c", "--config-env"):
            key, _, setting = value.text.partition("=")
            if value.dynamic or harmful(key, None if option == "--config-env" else setting):
                return index, options, directory, dynamic, f"git {option} {key} makes git run a program"
            options += [option, value.text]
        elif option in ("--git-dir", "--work-tree", "--namespace", "--bare"):
            dynamic = dynamic or value.dynamic
            options.append(f"{option}={value.text}" if option != "--bare" else option)
        elif option == "--exec-path" and has_inline:
            return index, options, directory, dynamic, "git --exec-path runs git's commands from elsewhere"
        index += 2 if takes_value else 1
    return index, options, directory, dynamic, None


def _runs_program(text: str, runs: frozenset[str]) -> bool:
    """An option (or a unique prefix of one, as git accepts) that makes git run a program."""
    option = text.partition("=")[0]
    if any(text.startswith(o) for o in runs if len(o) == 2):
        return True
    return option.startswith("--") and len(option) > 3 and any(o.startswith(option) for o in runs)


def harmful(key: str, value: str | None) -> bool:
    return bool(CODE_KEYS.fullmatch(key)) and (
        value is None
        or value.strip() not in _HARMLESS_VALUES
        or key.lower().startswith(("alias.", "include", "core.hookspath"))
    )


class GitAnalysis:
    """The git part of the release analyser (`release_analysis._Analyser` inherits it)."""

    protected: list[str]
    stale: bool
    exports: dict[str, str | None]

    def command_env(self, assignments: list[Word]) -> dict[str, str | None]:
        env = dict(self.exports)
        for word in assignments:
            name, _, value = word.text.partition("=")
            env[name.rstrip("+")] = None if word.dynamic else value
        return env

    def git(
        self, words: list[Word], assignments: list[Word], directory: str | None, taint: tuple[str, ...]
    ) -> None:
        env = self.command_env(assignments)
        # The environment the hook inherits is the agent's to set too (Claude Code's `env` settings): what
        # makes git run a program counts wherever it comes from.
        inherited = {k: v for k, v in os.environ.items() if k.startswith("GIT_") and k not in env}
        problem = _environment_problem({**inherited, **env})
        if problem is None:
            index, options, directory, dynamic, problem = _global_options(words, directory)
            dynamic = dynamic or any(v is None for k, v in env.items() if GIT_ENVIRONMENT.fullmatch(k))
        if problem is not None:
            self.hide(problem, words)
            return
        if index >= len(words):
            return
        sub, args = words[index], words[index + 1 :]
        if sub.dynamic:
            self.hide("a git subcommand computed at run time", words)
            return
        git_env = {
            k: v
            for k, v in env.items()
            if v is not None and (GIT_ENVIRONMENT.fullmatch(k) or k.startswith("GIT_"))
        }
        facts = None if directory is None or dynamic else self.repository.facts(directory, options, git_env)
        if (
            "GIT_CONFIG_COUNT" in env
            or "GIT_CONFIG_GLOBAL" in env
            or "GIT_CONFIG_SYSTEM" in env
            or "GIT_CONFIG" in env
        ) and facts:
            bad = next((k for k, vs in facts.config.items() for v in vs if harmful(k, v)), None)
            if bad is not None:
                self.hide(f"the configuration this command points git at sets {bad}", words)
                return
        runs = _PROGRAM_OPTIONS.get(sub.text, frozenset())
        if any(_runs_program(w.text, runs) for w in args):
            self.hide(f"git {sub.text} with an option that runs a program", words)
            return
        if sub.text not in GIT_COMMANDS:
            self.git_alias(sub, words[:index], args, facts, assignments, directory, taint)
            return
        context = Release(
            render(words),
            directory=directory,
            git_options=tuple(options),
            git_env=tuple(sorted(git_env.items())),
        )
        if (
            sub.text not in _KEEPS_STATE
            and sub.text not in _JUDGED_ELSEWHERE
            and _another_repository(options, git_env, facts)
        ):
            # reset, checkout, switch, commit, symbolic-ref… move the current branch of whatever repository
            # they are pointed at: in a bare one (a remote) that is a push by other means.
            self.unresolved(
                context,
                f"git {sub.text} in a bare repository (a remote), or with a git directory or "
                "work tree of its own, can move its branches without a push the gate can judge",
                taint,
                words,
            )
            return
        handler = {
            "push": self.git_push,
            "send-pack": self.git_push,
            "config": self.git_config,
            "merge": self.git_merge,
            "rebase": self.git_runs,
            "bisect": self.git_runs,
            "submodule": self.git_runs,
            "filter-branch": self.git_runs,
            "for-each-repo": self.git_runs,
            "worktree": self.git_runs,
            "update-ref": self.git_ref_update,
            "branch": self.git_ref_update,
            "fetch": self.git_ref_update,
        }.get(sub.text)
        if handler is not None:
            handler(sub.text, words, args, context, facts, taint)
        elif self.matches(render(words)):
            self.release(_located(context, directory), taint, words)
        if sub.text not in _KEEPS_STATE and not (
            sub.text == "config" and any(w.text in _CONFIG_READS for w in args)
        ):
            self.stale = True

    def git_alias(
        self,
        sub: Word,
        prefix: list[Word],
        args: list[Word],
        facts: RepoFacts | None,
        assignments: list[Word],
        directory: str | None,
        taint: tuple[str, ...],
    ) -> None:
        if facts is None or self.stale:
            self.hide(f"git {sub.text}: an alias the hook cannot resolve here", [*prefix, sub, *args])
            return
        expansion = facts.get(f"alias.{sub.text}")
        if expansion is None:
            return  # not an alias: git fails with "not a git command"
        if expansion.startswith("!"):
            self.hide(f"the git alias {sub.text} runs a shell command", [*prefix, sub, *args])
            return
        try:
            expanded = [Word(part) for part in shlex.split(expansion)]
        except ValueError:
            self.hide(f"the git alias {sub.text} cannot be read", expansion)
            return
        # Judged like the command it stands for; an alias of an alias is bounded by the nesting depth.
        self.simple([*prefix, *expanded, *args], assignments, False, False, directory, taint)

    def git_push(
        self,
        sub: str,
        words: list[Word],
        args: list[Word],
        context: Release,
        facts: RepoFacts | None,
        taint: tuple[str, ...],
    ) -> None:
        if any(w.dynamic for w in args if not w.text.startswith("-") or w.dynamic):
            self.hide("a push remote or target computed at run time", words)
            return
        if any(w.text.startswith("--") and expand_long(w.text, PUSH_OPTIONS) == "--no-verify" for w in args):
            self.hide("git push --no-verify", words)
            return
        plan = plan_push(args, facts, self.stale)
        if plan.dry_run:
            return
        gated = [
            (source, destination)
            for source, destination in plan.updates
            if is_protected(destination, self.protected)
            or self.matches(
                f"git push {shlex.quote(plan.remote)} {shlex.quote((source or '') + ':' + destination)}"
            )
        ]
        if plan.unknown is not None:
            self.unresolved(context, plan.unknown, taint, words)
        elif not gated:
            return
        elif any(source is None for source, _ in gated):
            self.unresolved(
                context, "it deletes a protected branch: there is no commit to judge", taint, words
            )
        elif self.stale:
            self.unresolved(
                context,
                "an earlier command in the same line changes the "
                "repository, so the commit it pushes cannot be known now; run the push on its own",
                taint,
                words,
            )
        else:
            sources = tuple(dict.fromkeys("HEAD" if s in ("@",) else s for s, _ in gated if s))
            self.release(_located(_replace(context, refs=sources), context.directory), taint, words)

    def git_config(
        self,
        sub: str,
        words: list[Word],
        args: list[Word],
        context: Release,
        facts: RepoFacts | None,
        taint: tuple[str, ...],
    ) -> None:
        if any(w.text in _CONFIG_READS for w in args):
            return
        positionals = [w for w in args if not w.text.startswith("-")]
        if positionals and positionals[0].text in (
            "set",
            "unset",
            "rename-section",
            "remove-section",
            "edit",
        ):
            positionals = positionals[1:]
        if any(w.text in ("-e", "--edit", "edit") for w in args):
            self.hide("git config --edit runs an editor", words)
            return
        if positionals and (positionals[0].dynamic or harmful(positionals[0].text, None)):
            self.hide(f"git config {positionals[0].text} makes git run a program", words)

    def git_merge(
        self,
        sub: str,
        words: list[Word],
        args: list[Word],
        context: Release,
        facts: RepoFacts | None,
        taint: tuple[str, ...],
    ) -> None:
        value_options = {"-m", "-F", "--file", "-s", "--strategy", "-X", "--strategy-option", "--into-name"}
        if not self.matches(render(words)):
            return
        refs: list[str] = []
        index = 0
        while index < len(args):
            word = args[index]
            if word.text in ("--abort", "--quit"):
                return
            if word.text == "--continue":
                refs.append("MERGE_HEAD")
            elif word.text.startswith("-") and not word.dynamic:
                index += 1 if word.text in value_options else 0
            elif word.dynamic:
                self.hide("a merged commit computed at run time", words)
                return
            else:
                refs.append(word.text)
            index += 1
        release = _replace(context, refs=tuple(refs))
        if self.stale:
            release = _replace(
                release, unresolved="an earlier command in the same line changes the repository"
            )
        self.release(_located(release, context.directory), taint, words)

    def git_ref_update(
        self,
        sub: str,
        words: list[Word],
        args: list[Word],
        context: Release,
        facts: RepoFacts | None,
        taint: tuple[str, ...],
    ) -> None:
        """A ref moved inside a bare repository (a remote, such as a local `origin.git`) is a push by other
        means: `git -C origin.git update-ref refs/heads/main X`, `branch -f main X`, `fetch ../w x:main`."""
        # A repository the hook cannot read may be bare: only a named protected target is held against it.
        bare = facts is not None and (facts.get("core.bare") or "").lower() == "true"
        if not (bare or facts is None) or (sub == "branch" and not any(w.text.startswith("-") for w in args)):
            return
        targets = _ref_update_targets(sub, args, facts)
        if targets is None and bare:
            self.unresolved(
                context, f"git {sub} in this repository can move refs the hook cannot list", taint, words
            )
        elif targets and any(is_protected(ref, self.protected) for ref in targets):
            self.unresolved(
                context,
                f"git {sub} moves a protected branch of a bare "
                "repository (a remote) without a push the gate can judge",
                taint,
                words,
            )

    def git_runs(
        self,
        sub: str,
        words: list[Word],
        args: list[Word],
        context: Release,
        facts: RepoFacts | None,
        taint: tuple[str, ...],
    ) -> None:
        """git commands that run a command of the agent's: rebase --exec, bisect run, submodule foreach..."""
        texts = [w.text for w in args]
        directory = context.directory
        if sub == "filter-branch" or (sub == "worktree" and "add" in texts and "--no-checkout" not in texts):
            if sub == "filter-branch":
                self.hide("git filter-branch runs shell filters", words)
            return
        if sub == "rebase":
            for index, word in enumerate(args):
                option, _, inline = word.text.partition("=")
                if option in ("-x", "--exec"):
                    code = (
                        Word(inline, word.dynamic)
                        if inline
                        else (args[index + 1] if index + 1 < len(args) else None)
                    )
                    if code is None or code.dynamic:
                        self.hide("git rebase --exec with a command computed at run time", words)
                    else:
                        self.nested(code.text, directory, taint, "git rebase --exec", tainted=True)
            return
        if sub == "bisect" and texts[:1] == ["run"]:
            self.simple(args[1:], [], False, False, directory, (*taint, "git bisect run"))
        elif sub in ("submodule", "for-each-repo") and "foreach" in texts or sub == "for-each-repo":
            rest = [w for w in args if not w.text.startswith("-") and w.text != "foreach"]
            if rest:
                code = rest[-1]
                if code.dynamic:
                    self.hide(f"git {sub} with a command computed at run time", words)
                else:
                    self.nested(" ".join(w.text for w in rest), directory, taint, f"git {sub}", tainted=True)


def _ref_update_targets(sub: str, args: list[Word], facts: RepoFacts | None) -> list[str] | None:
    """The full refs `git update-ref`, `git branch` or `git fetch` would move; None when it cannot be told."""
    positionals = [w for w in args if not w.text.startswith("-")]
    if any(w.dynamic for w in args) or any(w.text == "--stdin" for w in args):
        return None
    head = facts.head if facts is not None else None
    if sub == "update-ref":
        if not positionals:
            return []
        name = positionals[0].text
        if name == "HEAD":
            return [head] if head else None
        return [name if name.startswith("refs/") else f"refs/heads/{name}", name]
    if sub == "branch":
        return [f"refs/heads/{w.text}" for w in positionals] + ([head] if head else [])
    if len(positionals) < 2:
        return None  # the configured fetch refspecs of a bare repository may update its branches
    targets: list[str] = []
    for spec in positionals[1:]:
        value = spec.text.lstrip("+")
        source, colon, destination = value.partition(":")
        if "*" in value:
            return None
        if colon and destination:
            targets += _full_destinations(destination, source, facts)
    return targets


def git_environment_of(env: Mapping[str, str | None]) -> dict[str, str]:
    return {k: v for k, v in env.items() if v is not None and GIT_ENVIRONMENT.fullmatch(k)}
