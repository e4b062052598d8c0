"""python -m sentinel_acceptance run | local | mint — see docs/acceptance.md."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from sentinel_service import names

from .report import DEFAULT_REPORTS, REPO
from .target import AWS, DEFAULT_BUILD, DEFAULT_PROJECT, EXPECT_MODES, Target

ENV_STACK = "SENTINEL_ACCEPTANCE_STACK"
ENV_EXPECT_MODE = "SENTINEL_ACCEPTANCE_EXPECT_MODE"
ENV_PROJECT = "SENTINEL_ACCEPTANCE_PROJECT"


def default_stack() -> str:
    """The stack `make deploy` just deployed (its outputs file names it), else SENTINEL_ACCEPTANCE_STACK, else
    the stage cdk.json names."""
    if os.environ.get(ENV_STACK):
        return os.environ[ENV_STACK]
    outputs = REPO / names.STACK_OUTPUTS_FILE
    if outputs.exists():
        stacks = list(json.loads(outputs.read_text()))
        if len(stacks) == 1:
            return str(stacks[0])
    stage = json.loads((REPO / "cdk.json").read_text()).get("context", {}).get("stage", "dev")
    return names.stack_name(stage)


def default_region() -> str | None:
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        return region
    import boto3

    return boto3.session.Session().region_name


def cmd_run(args: argparse.Namespace) -> int:
    from . import gate

    region = args.region or default_region()
    if not region:
        print("error: no AWS region: set AWS_REGION or pass --region", file=sys.stderr)
        return 2
    target = Target(
        kind=AWS,
        stack_name=args.stack or default_stack(),
        region=region,
        build_dir=args.build_dir,
        project=args.project,
        expect_mode=args.expect_mode,
        api_url=args.api_url,
        alias=args.alias,
    )
    return 0 if gate.run(target, args.reports_dir).passed else 1


def cmd_local(args: argparse.Namespace) -> int:
    from .emulation import LocalRun, read_synth, run_local, synthesize

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sentinel-synth-") as outdir:
        if args.cdk_out:
            synth = read_synth(args.cdk_out, args.stack or default_stack())
            print(f"using the synthesized {synth.stack_name} in {args.cdk_out}", flush=True)
        else:
            print("synthesizing the stack (cdk-nag included) from", args.build_dir, flush=True)
            synth = synthesize(args.build_dir, Path(outdir))
        synthesized = time.monotonic()
        print(f"synthesized {synth.stack_name} in {synthesized - started:.1f} s", flush=True)
        options = LocalRun(project=args.project, expect_mode=args.expect_mode)
        outcome = run_local(
            args.build_dir, args.reports_dir, synth, options, say=lambda line: print(line, flush=True)
        )
    laps = ", ".join(f"{name} {ms / 1000:.1f} s" for name, ms in options.timings.items())
    print(
        f"acceptance-local: {'passed' if outcome.passed else 'FAILED'} in {time.monotonic() - started:.1f} s "
        f"(synth {synthesized - started:.1f} s, {laps}); report {outcome.report}"
    )
    return 0 if outcome.passed else 1


def cmd_mint(args: argparse.Namespace) -> int:
    import boto3

    from sentinel_service.adapters.tokens import parse_duration

    from .tokens import (
        NotSynthetic,
        append_github_env,
        default_secret_id,
        mint,
        operator_runtime,
        store_in_secret,
    )

    region = args.region or default_region()
    stack = args.stack or default_stack()
    if not region:
        print("error: no AWS region: set AWS_REGION or pass --region", file=sys.stderr)
        return 2
    described = boto3.client("cloudformation", region_name=region).describe_stacks(StackName=stack)["Stacks"][
        0
    ]
    outputs = {o["OutputKey"]: o.get("OutputValue") for o in described.get("Outputs", [])}
    try:
        minted = mint(operator_runtime(outputs, region), args.project, parse_duration(args.ttl))
    except NotSynthetic as refused:
        print(f"error: NOT_SYNTHETIC: {refused}\nnext: {refused.next_step}", file=sys.stderr)
        return 1
    where = []
    if args.github_env:
        append_github_env(args.github_env, minted)
        where.append("the GitHub Actions environment (masked)")
    if args.secret_id or not args.github_env:
        secret_id = args.secret_id or default_secret_id(stack.removeprefix(names.stack_name("")))
        store_in_secret(boto3.client("secretsmanager", region_name=region), secret_id, minted)
        where.append(f"secret {secret_id}")
    print(
        json.dumps(
            {
                "project": args.project,
                "created": minted.created,
                "expires_at": minted.expires_at,
                "stored_in": where,
            }
        )
    )
    return 0


def cmd_retire(args: argparse.Namespace) -> int:
    """Void the acceptance tokens a run used (make acceptance runs it after every run it minted for)."""
    import boto3

    from .tokens import Minted, default_secret_id, operator_runtime, retire, store_in_secret

    region = args.region or default_region()
    stack = args.stack or default_stack()
    if not region:
        print("error: no AWS region: set AWS_REGION or pass --region", file=sys.stderr)
        return 2
    described = boto3.client("cloudformation", region_name=region).describe_stacks(StackName=stack)["Stacks"][
        0
    ]
    outputs = {o["OutputKey"]: o.get("OutputValue") for o in described.get("Outputs", [])}
    retired = retire(operator_runtime(outputs, region))
    secret_id = args.secret_id or default_secret_id(stack.removeprefix(names.stack_name("")))
    try:  # the secret then holds no token: nothing voided lingers where the next run would look
        store_in_secret(boto3.client("secretsmanager", region_name=region), secret_id, Minted({}, {}, []))
    except Exception as error:  # the tokens are void either way
        print(f"retire: the secret {secret_id} was not emptied: {error}", file=sys.stderr)
    print(json.dumps({"retired": retired}))
    return 0


def _stack_functions(region: str, stack: str) -> dict[str, str] | None:
    """{function: physical name} from the stack's outputs; None when the stack does not exist yet."""
    import boto3

    cloudformation = boto3.client("cloudformation", region_name=region)
    try:
        described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    except cloudformation.exceptions.ClientError as error:
        if "does not exist" in str(error):
            return None
        raise
    outputs = {o["OutputKey"]: o.get("OutputValue") for o in described.get("Outputs", [])}
    from .promote import PROMOTED

    # A stack from before the integrity functions has no outputs for them: they are left out.
    return {fn: str(outputs[key]) for fn in PROMOTED if (key := names.function_output_key(fn)) in outputs}


def cmd_live_versions(args: argparse.Namespace) -> int:
    """Print {function: version} of the live aliases now, for `cdk deploy -c liveVersions=...`: the deploy
    then leaves them where they are. `{}` for a stack that does not exist yet (its first deploy)."""
    import boto3

    from .promote import aliases

    region = args.region or default_region()
    if not region:
        print("error: no AWS region: set AWS_REGION or pass --region", file=sys.stderr)
        return 2
    functions = _stack_functions(region, args.stack or default_stack())
    if functions is None:
        print("{}")
        return 0
    live = aliases(boto3.client("lambda", region_name=region), functions, names.LIVE_ALIAS)
    print(json.dumps({fn: version for fn, version in live.items() if version is not None}, sort_keys=True))
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    import boto3

    from .promote import PromotionFailed, PromotionRefused, promote
    from .target import read_build

    region = args.region or default_region()
    stack = args.stack or default_stack()
    if not region:
        print("error: no AWS region: set AWS_REGION or pass --region", file=sys.stderr)
        return 2
    functions = _stack_functions(region, stack)
    if functions is None:
        print(f"promote: refused: stack {stack} does not exist", file=sys.stderr)
        return 1
    try:
        done = promote(
            boto3.client("lambda", region_name=region),
            stack,
            functions,
            read_build(args.build_dir),
            args.reports_dir,
        )
    except PromotionRefused as refused:
        print(f"promote: refused, {names.LIVE_ALIAS} unchanged: {refused}", file=sys.stderr)
        return 1
    except PromotionFailed as failed:
        print(f"promote: FAILED: {failed}", file=sys.stderr)
        return 1
    print(json.dumps(done.to_json()))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sentinel_acceptance", description="The Sentinel acceptance gate"
    )
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--build-dir", type=Path, default=DEFAULT_BUILD, help="where `make build` wrote digests.json"
        )
        sp.add_argument("--reports-dir", type=Path, default=DEFAULT_REPORTS, help="where attempt reports go")
        sp.add_argument(
            "--project",
            default=os.environ.get(ENV_PROJECT, DEFAULT_PROJECT),
            help="the dedicated acceptance project",
        )
        sp.add_argument(
            "--expect-mode",
            choices=EXPECT_MODES,
            default=os.environ.get(ENV_EXPECT_MODE, "auto"),
            help="the proposal's expected mode (auto: model when health names a model provider)",
        )

    run = sub.add_parser("run", help="check the deployed stack (make acceptance)")
    common(run)
    run.add_argument(
        "--stack", help=f"default: the one in {names.STACK_OUTPUTS_FILE}, ${ENV_STACK}, or cdk.json's"
    )
    run.add_argument("--region")
    run.add_argument("--api-url", help="override the stack's ApiUrl output (a custom domain in front of it)")
    run.add_argument(
        "--alias",
        choices=(names.LIVE_ALIAS, names.NEXT_ALIAS),
        default=names.LIVE_ALIAS,
        help=f"{names.NEXT_ALIAS}: what a deploy just published, through the acceptance API (make deploy, "
        f"before promoting); {names.LIVE_ALIAS}: what production serves",
    )
    run.set_defaults(run=cmd_run)

    local = sub.add_parser("local", help="check an emulated deployment on moto (make acceptance-local)")
    common(local)
    local.add_argument(
        "--cdk-out",
        type=Path,
        help="reuse this synthesized cloud assembly (made from the same build) instead of synthesizing",
    )
    local.add_argument("--stack", help="the stack in --cdk-out (default: cdk.json's stage)")
    local.set_defaults(run=cmd_local)

    minting = sub.add_parser(
        "mint", help="provision the acceptance principals and issue short-lived tokens (operator credentials)"
    )
    minting.add_argument("--stack")
    minting.add_argument("--region")
    minting.add_argument("--project", default=os.environ.get(ENV_PROJECT, DEFAULT_PROJECT))
    minting.add_argument(
        "--ttl", default="1h", help="token lifetime (e.g. 30m, 1h; at most 24h is short-lived)"
    )
    minting.add_argument(
        "--secret-id",
        help="Secrets Manager secret to store the tokens in (default sentinel/<stage>/acceptance-tokens)",
    )
    minting.add_argument("--github-env", help="append the tokens, masked, to this file ($GITHUB_ENV)")
    minting.set_defaults(run=cmd_mint)

    retiring = sub.add_parser(
        "retire", help="void the acceptance tokens a run used (operator credentials; make acceptance runs it)"
    )
    retiring.add_argument("--stack")
    retiring.add_argument("--region")
    retiring.add_argument("--secret-id")
    retiring.set_defaults(run=cmd_retire)

    promoting = sub.add_parser(
        "promote", help=f"move {names.LIVE_ALIAS} to the {names.NEXT_ALIAS} versions a passing run accepted"
    )
    promoting.add_argument("--stack")
    promoting.add_argument("--region")
    promoting.add_argument("--build-dir", type=Path, default=DEFAULT_BUILD)
    promoting.add_argument("--reports-dir", type=Path, default=DEFAULT_REPORTS)
    promoting.set_defaults(run=cmd_promote)

    live = sub.add_parser(
        "live-versions", help=f"print the versions the {names.LIVE_ALIAS} aliases serve (JSON)"
    )
    live.add_argument("--stack")
    live.add_argument("--region")
    live.set_defaults(run=cmd_live_versions)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
