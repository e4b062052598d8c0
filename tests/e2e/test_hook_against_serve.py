"""The hook and the CI gate as subprocesses against `sentinel serve` (one per module), on real git commits:
one made ready through API.md's ready flow, one on hold, one with no candidate; and every Claude Code input
of ../shared/corpus/hooks, as written and pointed at those commits."""

import json
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sentinel_client.flow import run_ready_flow
from sentinel_client.hook_messages import REMEDIATION
from sentinel_runner.demo import LocalGate
from support.hook_harness import CORPUS, bash_event, clean_env, corpus_event, git, make_repo, run_hook

pytestmark = pytest.mark.http

NEXT_HOLD = (
    "Resolve the findings, then retry. The required CI check (sentinel-hook gate) enforces the same decision."
)
NEXT_ERROR = (
    "Fix the cause, then retry: a release command needs a ready decision, and the required CI check "
    "(sentinel-hook gate) enforces the same decision."
)


@dataclass
class Commit:
    repo: Path
    sha: str
    candidate_id: str | None
    decision: dict[str, Any]


@dataclass
class World:
    env: dict[str, str]
    ready: Commit
    hold: Commit
    unknown: Commit
    url: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("serve")
    with tempfile.TemporaryDirectory() as data, LocalGate(Path(data)) as gate:
        auditor = gate.client("auditor")
        # Given a commit made ready through the whole flow of API.md
        ready_sha = make_repo(root / "ready", "ready")
        clients = {role: gate.client(role) for role in ("requester", "publisher", "reviewer")}
        ready_id = run_ready_flow(clients, "demo", revision=ready_sha).candidate_id
        # And a commit whose candidate has an attested change and a plan, but no review, evidence or report
        hold_sha = make_repo(root / "hold", "hold")
        requester, publisher = gate.client("requester"), gate.client("publisher")
        change = {"files": ["services/payments/api.py"]}
        created = requester.create_candidate(
            "demo",
            {
                "subject": "payments",
                "base_revision": secrets.token_hex(20),
                "revision": hold_sha,
                "environment": "staging",
                "change": change,
            },
        )
        hold_id = created.body["candidate_id"]
        assert publisher.add_change_context("demo", hold_id, change).status == 201
        assert requester.propose("demo", hold_id).status == 201
        # And a commit nobody made a candidate for
        unknown_sha = make_repo(root / "unknown", "unknown")
        # The hook reads as a read-only principal would: the auditor's token, from a file
        token = root / "home" / "token"
        token.parent.mkdir()
        token.write_text(gate.banner["seed"]["principals"]["auditor"]["token"])
        env = clean_env(
            token.parent,
            url=gate.banner["url"],
            project="demo",
            subject="payments",
            environment="staging",
            token_file=str(token),
            timeout_seconds="10",
        )
        yield World(
            env,
            Commit(root / "ready", ready_sha, ready_id, auditor.decision("demo", ready_id).body),
            Commit(root / "hold", hold_sha, hold_id, auditor.decision("demo", hold_id).body),
            Commit(root / "unknown", unknown_sha, None, {}),
            gate.banner["url"],
        )


def finding_lines(decision: dict[str, Any]) -> list[str]:
    """The documented finding line: code, where, detail, and the policy's remediation hint when there is
    one."""
    lines = []
    for finding in decision["findings"]:
        where = [
            f"{label} {finding[key]}"
            for key, label in (("obligation_id", "obligation"), ("check_id", "check"), ("task_id", "task"))
            if finding[key]
        ]
        line = f"- {finding['code']}" + (f" ({', '.join(where)})" if where else "") + f": {finding['detail']}"
        lines.append(
            line
            + (
                f" Remediation: {finding['remediation_hint']}"
                if finding["remediation_hint"]
                else f" Remediation: {REMEDIATION[finding['code']]}."
            )
        )
    return lines


def hold_denial(world: World, command: str) -> str:
    hold = world.hold
    return (
        "\n".join(
            [
                f"Sentinel denied `{command}`: payments at {hold.sha} in staging is on hold (candidate "
                f"{hold.candidate_id}).",
                *finding_lines(hold.decision),
                NEXT_HOLD,
            ]
        )
        + "\n"
    )


# ---- the corpus, as written ---------------------------------------------------------------------------

UNRESOLVED_PUSH = (
    "Sentinel denied `git push origin HEAD`: no decision could be established for it (fail closed).\n"
    "- REVISION_UNRESOLVED: the hook cannot tell which branch HEAD updates (not a git repository, or "
    f"not on a branch) Remediation: {REMEDIATION['REVISION_UNRESOLVED']}.\n{NEXT_ERROR}\n"
)
UNRESOLVED_HEAD = (
    "- REVISION_UNRESOLVED: `git rev-parse HEAD` names no commit in /home/dev/orders-service Remediation: "
    f"{REMEDIATION['REVISION_UNRESOLVED']}."
)
AS_WRITTEN = {
    # Nothing to gate: events that cannot release, tools that never release, commands that are no release.
    "PostToolUse-Bash.json": (0, "", ""),
    "PostToolUse-Write.json": (0, "", ""),
    "PostToolUse-Write-in-subagent.json": (0, "", ""),
    "PostToolUseFailure-Bash.json": (0, "", ""),
    "UserPromptSubmit.json": (0, "", ""),
    "PreToolUse-Bash.json": (0, "", ""),
    "PreToolUse-Edit.json": (0, "", ""),
    "PreToolUse-Write.json": (0, "", ""),
    "PreToolUse-Write-windows-path.json": (0, "", ""),
    # `git push origin HEAD` in a directory that does not exist here: which branch it updates is unknown.
    "PreToolUse-Bash-minimal-fields.json": (2, "", UNRESOLVED_PUSH),
    # The agent claims to be done in a directory with no commit: nudged once, then the user is told.
    "Stop.json": (
        2,
        "",
        "Sentinel: this change is not ready to release: no decision could be established for "
        f"this change (fail closed).\n{UNRESOLVED_HEAD}\nBefore finishing, fix the cause, or tell "
        "the user plainly that its readiness is unconfirmed.\n",
    ),
    "Stop-hook-active-with-background-work.json": (
        0,
        json.dumps(
            {
                "systemMessage": (
                    "Sentinel: the agent stopped while the readiness of this change could not be established "
                    "(REVISION_UNRESOLVED). A release will be denied until it is ready."
                )
            }
        )
        + "\n",
        "",
    ),
}


def test_the_corpus_table_covers_every_input() -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"the hook corpus is absent: {CORPUS} does not exist")
    assert sorted(path.name for path in CORPUS.glob("*.json")) == sorted(AS_WRITTEN)


@pytest.mark.parametrize("name", sorted(AS_WRITTEN))
def test_every_corpus_input_as_written(world: World, name: str) -> None:
    # Given a documented Claude Code input, unchanged (its cwd does not exist on this machine)
    # When the hook reads it with settings pointing at sentinel serve
    ran = run_hook(corpus_event(name), world.env)
    # Then the output and exit code are exactly the documented contract's
    assert (ran.exit_code, ran.stdout, ran.stderr) == AS_WRITTEN[name]


# ---- the corpus, pointed at real commits --------------------------------------------------------------


def test_a_push_of_a_ready_commit_passes_without_a_decision(world: World) -> None:
    # Given the corpus's `git push origin HEAD`, run in a checkout of main at the ready commit
    ran = run_hook(corpus_event("PreToolUse-Bash-minimal-fields.json", cwd=str(world.ready.repo)), world.env)
    # Then the hook exits 0 and prints nothing (an explicit allow would skip Claude Code's permission prompt)
    assert (ran.exit_code, ran.stdout, ran.stderr) == (0, "", "")


def on_hold(world: World, name: str) -> tuple[int, str, str]:
    """What each corpus input gets when its cwd is a checkout of main at the held commit."""
    hold = world.hold
    if name == "PreToolUse-Bash-minimal-fields.json":
        return 2, "", hold_denial(world, "git push origin HEAD")
    if name == "Stop.json":  # "... All tests pass.": a claim of being done
        return (
            2,
            "",
            "\n".join(
                [
                    f"Sentinel: this change is not ready to release: payments at {hold.sha} in staging is on "
                    f"hold (candidate {hold.candidate_id}).",
                    *finding_lines(hold.decision),
                    "Before finishing, resolve the findings, or tell the user plainly that the change is not "
                    "ready to release.",
                ]
            )
            + "\n",
        )
    if name == "Stop-hook-active-with-background-work.json":  # already continued once: tell the user
        return (
            0,
            json.dumps(
                {
                    "systemMessage": (
                        f"Sentinel: the agent stopped while payments at {hold.sha} in staging is on hold "
                        "(EVIDENCE_MISSING, REVIEW_MISSING, TASK_NOT_REPORTED). A release will be denied "
                        "until it is ready."
                    )
                }
            )
            + "\n",
            "",
        )
    return 0, "", ""  # no release, no claim of being done: a held commit changes nothing


@pytest.mark.parametrize("name", sorted(AS_WRITTEN))
def test_every_corpus_input_on_a_held_commit(world: World, name: str) -> None:
    # Given the held candidate: its findings carry the policies' remediation hints
    assert sorted({f["code"] for f in world.hold.decision["findings"]}) == [
        "EVIDENCE_MISSING",
        "REVIEW_MISSING",
        "TASK_NOT_REPORTED",
    ]
    assert "Remediation: Run pytest -q locally and read the first failure" in "\n".join(
        finding_lines(world.hold.decision)
    )
    # When each documented input arrives from a checkout of main at that commit
    ran = run_hook(corpus_event(name, cwd=str(world.hold.repo)), world.env)
    # Then only the release command and the claims of being done are stopped, with every finding
    assert (ran.exit_code, ran.stdout, ran.stderr) == on_hold(world, name)


def test_a_push_of_a_commit_without_a_candidate_is_denied(world: World) -> None:
    ran = run_hook(
        corpus_event("PreToolUse-Bash-minimal-fields.json", cwd=str(world.unknown.repo)), world.env
    )
    assert (ran.exit_code, ran.stdout) == (2, "")
    assert ran.stderr == (
        f"Sentinel denied `git push origin HEAD`: payments at {world.unknown.sha} in staging is on hold.\n"
        "- NO_CANDIDATE: no candidate exists for this subject, revision and environment Remediation: create "
        "the candidate for this exact commit (POST /v1/projects/demo/candidates) and have CI attest it\n"
        f"{NEXT_HOLD}\n"
    )


def test_the_pushed_ref_is_judged_not_the_checkout(world: World) -> None:
    # Given a checkout of the held commit that also has the ready commit as a branch
    repo = world.hold.repo
    git("fetch", "-q", str(world.ready.repo), f"main:shipped-{secrets.token_hex(3)}", cwd=repo)
    branch = git("branch", "--format=%(refname:short)", "--list", "shipped-*", cwd=repo).splitlines()[0]
    # When the agent pushes that branch to main, Then the ready commit is judged and the push passes
    ran = run_hook(bash_event(f"git push origin {branch}:main", repo), world.env)
    assert (ran.exit_code, ran.stdout, ran.stderr) == (0, "", "")
    # And merging the held branch from the ready checkout is judged on the held commit
    ran = run_hook(bash_event(f"git merge {world.hold.sha}", world.ready.repo), world.env)
    assert (ran.exit_code, ran.stderr) == (2, hold_denial(world, f"git merge {world.hold.sha}"))


def test_a_refused_token_is_a_denial(world: World, tmp_path: Path) -> None:
    forged = tmp_path / "forged"
    forged.write_text("snt_" + "A" * 49)
    env = {**world.env, "SENTINEL_TOKEN_FILE": str(forged)}
    ran = run_hook(corpus_event("PreToolUse-Bash-minimal-fields.json", cwd=str(world.ready.repo)), env)
    assert (ran.exit_code, ran.stdout, ran.stderr) == (
        2,
        "",
        (
            f"Sentinel denied `git push origin HEAD`: no decision could be established for payments at "
            f"{world.ready.sha} in staging (fail closed).\n- TOKEN_REFUSED: the service refused the token "
            f"(HTTP 403): unknown, malformed, expired or revoked Remediation: {REMEDIATION['TOKEN_REFUSED']}."
            f"\n{NEXT_ERROR}\n"
        ),
    )


def test_another_environment_has_no_candidate_for_the_ready_commit(world: World) -> None:
    env = {**world.env, "SENTINEL_ENVIRONMENT": "production"}
    ran = run_hook(corpus_event("PreToolUse-Bash-minimal-fields.json", cwd=str(world.ready.repo)), env)
    assert ran.exit_code == 2
    assert ran.stderr.startswith(
        f"Sentinel denied `git push origin HEAD`: payments at {world.ready.sha} in "
        "production is on hold.\n- NO_CANDIDATE:"
    )


# ---- claims of being done -----------------------------------------------------------------------------


def test_stop_on_a_ready_commit_lets_the_agent_finish(world: World) -> None:
    for name in ("Stop.json", "Stop-hook-active-with-background-work.json"):
        ran = run_hook(corpus_event(name, cwd=str(world.ready.repo)), world.env)
        assert (ran.exit_code, ran.stdout, ran.stderr) == (0, "", ""), name


# The documented shapes of the two events the corpus has no file for (hooks reference, SubagentStop and
# TaskCompleted input): the common fields plus their own.
SUBAGENT_STOP = {
    "hook_event_name": "SubagentStop",
    "stop_hook_active": False,
    "agent_id": "def456",
    "agent_type": "Explore",
    "agent_transcript_path": "/dev/null",
    "last_assistant_message": "Implemented the pagination; the contract tests pass.",
    "background_tasks": [],
    "session_crons": [],
}
TASK_COMPLETED = {
    "hook_event_name": "TaskCompleted",
    "task_id": "task-001",
    "task_subject": "Implement user authentication",
    "teammate_name": "implementer",
}


@pytest.mark.parametrize(
    ("fields", "finish"), [(SUBAGENT_STOP, "finishing"), (TASK_COMPLETED, "marking the task completed")]
)
def test_claiming_done_on_a_held_commit_is_sent_back_once(world: World, fields: dict, finish: str) -> None:
    # Given a subagent or a teammate says it is done while the candidate of its commit holds
    event = {
        "session_id": "s",
        "transcript_path": "/dev/null",
        "cwd": str(world.hold.repo),
        "permission_mode": "default",
        **fields,
    }
    ran = run_hook(event, world.env)
    # Then it is sent back with the findings (exit 2: the reason on stderr reaches the agent)
    hold = world.hold
    assert (ran.exit_code, ran.stdout) == (2, "")
    assert (
        ran.stderr
        == "\n".join(
            [
                f"Sentinel: this change is not ready to release: payments at {hold.sha} in staging is on "
                f"hold (candidate {hold.candidate_id}).",
                *finding_lines(hold.decision),
                f"Before {finish}, resolve the findings, or tell the user plainly that the change is not "
                "ready to release.",
            ]
        )
        + "\n"
    )


def test_a_turn_that_claims_nothing_is_left_alone(world: World) -> None:
    # Given a turn that ends with a question, on a held commit
    event = corpus_event(
        "Stop.json",
        cwd=str(world.hold.repo),
        last_assistant_message="Which database should the orders service use?",
    )
    # Then the agent is not sent back: Stop fires at every turn, and this one claims no work is finished
    ran = run_hook(event, world.env)
    assert (ran.exit_code, ran.stdout, ran.stderr) == (0, "", "")


def test_a_stop_without_its_final_message_is_judged(world: World) -> None:
    # Given an older Claude Code that sends no last_assistant_message
    event = corpus_event("Stop.json", cwd=str(world.hold.repo))
    del event["last_assistant_message"]
    # Then the hook cannot tell what the agent claimed, and judges the commit
    ran = run_hook(event, world.env)
    assert ran.exit_code == 2
    assert ran.stderr.startswith(
        f"Sentinel: this change is not ready to release: payments at {world.hold.sha}"
    )


# ---- the CI gate --------------------------------------------------------------------------------------


def test_the_gate_answers_ready_hold_and_no_candidate_with_exit_codes(world: World) -> None:
    ready = run_hook(b"", world.env, "gate", "--revision", world.ready.sha)
    held = run_hook(b"", world.env, "gate", "--revision", world.hold.sha)
    unknown = run_hook(b"", world.env, "gate", "--revision", world.unknown.sha)
    assert (ready.exit_code, ready.stdout, ready.stderr) == (
        0,
        f"READY  payments at {world.ready.sha} in staging (candidate {world.ready.candidate_id})\n",
        "",
    )
    lines = [f"HOLD  payments at {world.hold.sha} in staging (candidate {world.hold.candidate_id})"]
    for finding in world.hold.decision["findings"]:
        where = [
            f"{label} {finding[key]}"
            for key, label in (("obligation_id", "obligation"), ("check_id", "check"), ("task_id", "task"))
            if finding[key]
        ]
        lines.append(f"  {finding['code']}" + (f" ({', '.join(where)})" if where else ""))
        lines.append(f"      {finding['detail']}")
        if finding["remediation_hint"]:
            lines.append(f"      remediation: {finding['remediation_hint']}")
    assert (held.exit_code, held.stdout, held.stderr) == (1, "\n".join(lines) + "\n", "")
    assert (unknown.exit_code, unknown.stderr) == (1, "")
    assert unknown.stdout.startswith(f"HOLD  payments at {world.unknown.sha} in staging\n  NO_CANDIDATE\n")
