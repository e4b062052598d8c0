"""The local emulation target: the synthesized stack created by CloudFormation on a moto server on loopback,
and the local runner started from the built packages in front of the tables that stack created.

So the stack's status and each function's CodeSha256 are real reads of a real (emulated) API, and the HTTP
checks go through the same gateway emulation, authorizer and handlers that `sentinel serve` runs, imported
from the unzipped functions.zip and core layer rather than the source tree.

moto's CloudFormation does not create every resource type, and refuses some templates outright. `adapt()`
changes the template only as far as moto needs, and every change is listed in the report:
- resource types moto cannot create are taken out, and references to them become marked placeholder ARNs (an
  output that reads an attribute of one would make moto refuse the whole template);
- Lambda permissions that grant such a resource (API Gateway) access to an alias are taken out with it;
- an event archive gets an explicit name (moto generates one longer than its own limit) and its event pattern
  as a string (moto's CloudFormation handler passes the object on where its API expects text);
- KMS key tags are given in the KMS API's shape (TagKey/TagValue), which moto's handler passes on unchanged.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentinel_service import names
from sentinel_service.adapters.tokens import parse_duration
from sentinel_service.http.routes import FUNCTIONS

from .target import DEFAULT_PROJECT, EMULATION, BuiltPackage, Emulation, Target, read_build
from .tokens import DEFAULT_TTL, mint, operator_runtime, retire
from .webhook import FORGE_SECRETS, webhook_secret_file

REPO = Path(__file__).resolve().parents[2]  # src/<package>/<module>.py
REGION = "us-east-1"
BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"
BOOTSTRAP_VERSION = "30"
STACK_TIMEOUT_SECONDS = 120
RUNNER_START_SECONDS = 60
PLACEHOLDER = "arn:aws:not-emulated:{region}:000000000000:{what}"
# The runner's own code, which is not part of the deployment: `sentinel serve` (sentinel_runner) and the CLI
# verbs its parser registers (sentinel_runner.cli imports sentinel_evaluation.cli for `sentinel eval`). Copied
# from the repository.
RUNNER_PACKAGES = ("sentinel_runner", "sentinel_gateway", "sentinel_evaluation", "sentinel_client")


@dataclass
class Asset:
    bucket: str  # with ${AWS::AccountId} and ${AWS::Region} placeholders, as assets.json names it
    key: str
    path: Path


@dataclass
class Synth:
    """One synthesized stack: its template and the files its assets manifest names."""

    stack_name: str
    template: dict[str, Any]
    assets: list[Asset]
    outdir: Path


def synthesize(build_dir: Path, outdir: Path, context: Mapping[str, Any] | None = None) -> Synth:
    """`python app.py` in-process (cdk-nag included) into `outdir`, from the packages in `build_dir`."""
    if str(REPO) not in sys.path:  # app.py and infra/ live at the repository root, outside the packages
        sys.path.insert(0, str(REPO))
    from app import build_app

    app, stack = build_app(dict(context or {}), outdir=str(outdir), build_dir=Path(build_dir))
    app.synth()
    return read_synth(Path(outdir), stack.stack_name)


def read_synth(outdir: Path, stack_name: str) -> Synth:
    template = json.loads((outdir / f"{stack_name}.template.json").read_text())
    manifest = json.loads((outdir / f"{stack_name}.assets.json").read_text())
    assets = []
    for entry in manifest.get("files", {}).values():
        source = outdir / entry["source"]["path"]
        if entry["source"].get("packaging") == "zip":
            raise ValueError(f"{source}: directory assets are not used by this stack")
        for destination in entry["destinations"].values():
            assets.append(Asset(destination["bucketName"], destination["objectKey"], source))
    return Synth(stack_name, template, assets, outdir)


# ---- the template moto accepts -----------------------------------------------------------------------------


def _quiet_moto() -> None:
    # moto logs a warning for every resource type it skips, at synth-adaptation and at create time; the
    # report lists them once instead.
    logging.getLogger("moto").setLevel(logging.ERROR)


def _moto_creates(resource_type: str) -> bool:
    from moto.cloudformation.parsing import resource_class_from_type

    _quiet_moto()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # moto warns for each type it lacks; the report says it once
        return resource_class_from_type(resource_type) is not None


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("Ref"), str):
            yield node["Ref"]
        if "Fn::GetAtt" in node:
            yield node["Fn::GetAtt"][0]
        for value in node.values():
            yield from _references(value)
    elif isinstance(node, list):
        for value in node:
            yield from _references(value)


def adapt(template: dict[str, Any], region: str = REGION) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(template for moto, {logical id: type} left out, adaptations in words)."""
    adapted = json.loads(json.dumps(template))
    resources = adapted["Resources"]
    skipped = _left_out(resources)
    for logical in skipped:
        resources.pop(logical)
    _drop_dependencies_on(resources, skipped)
    adapted["Resources"] = _with_placeholders(resources, skipped, region)
    adapted["Outputs"] = _with_placeholders(adapted.get("Outputs", {}), skipped, region)
    adaptations = _left_out_text(skipped)
    adaptations += _fit_properties_for_moto(adapted["Resources"])
    return adapted, skipped, adaptations


def _left_out(resources: dict[str, Any]) -> dict[str, str]:
    """{logical id: type} of the resources moto's CloudFormation does not create, and of the Lambda
    permissions on a function left out."""
    skipped = {k: r["Type"] for k, r in resources.items() if not _moto_creates(r["Type"])}
    for logical, resource in resources.items():
        if (
            resource["Type"] == "AWS::Lambda::Permission"
            and logical not in skipped
            and set(_references(resource["Properties"].get("FunctionName"))) & set(skipped)
        ):
            skipped[logical] = resource["Type"]
    return skipped


def _drop_dependencies_on(resources: dict[str, Any], skipped: dict[str, str]) -> None:
    """DependsOn without the resources left out (and without DependsOn when none is left)."""
    for resource in resources.values():
        if "DependsOn" in resource:
            depends = (
                resource["DependsOn"] if isinstance(resource["DependsOn"], list) else [resource["DependsOn"]]
            )
            kept = [d for d in depends if d not in skipped]
            if kept:
                resource["DependsOn"] = kept
            else:
                resource.pop("DependsOn")


def _with_placeholders(node: Any, skipped: dict[str, str], region: str) -> Any:
    """`node` with each Ref or Fn::GetAtt to a resource left out replaced by a placeholder ARN."""
    if isinstance(node, dict):
        if set(node) == {"Ref"} and node["Ref"] in skipped:
            return PLACEHOLDER.format(region=region, what=node["Ref"])
        if set(node) == {"Fn::GetAtt"} and node["Fn::GetAtt"][0] in skipped:
            return PLACEHOLDER.format(region=region, what="/".join(node["Fn::GetAtt"]))
        return {k: _with_placeholders(v, skipped, region) for k, v in node.items()}
    if isinstance(node, list):
        return [_with_placeholders(v, skipped, region) for v in node]
    return node


def _left_out_text(skipped: dict[str, str]) -> list[str]:
    """One adaptation in words per resource type left out."""
    counts: dict[str, int] = {}
    for kind in skipped.values():
        counts[kind] = counts.get(kind, 0) + 1
    return [
        f"left out {n} {kind} (moto's CloudFormation does not create it); references to it are "
        "placeholder ARNs containing 'not-emulated'"
        for kind, n in sorted(counts.items())
    ]


def _fit_properties_for_moto(resources: dict[str, Any]) -> list[str]:
    """Properties rewritten where moto reads them otherwise than CloudFormation does; the adaptations in
    words."""
    adaptations: list[str] = []
    for logical, resource in resources.items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Events::Archive":
            if "ArchiveName" not in props:
                props["ArchiveName"] = f"emulated-{logical}"[:48]
                adaptations.append(
                    f"{logical}: ArchiveName given (moto generates one over its 48-character limit)"
                )
            if isinstance(props.get("EventPattern"), dict):
                props["EventPattern"] = json.dumps(props["EventPattern"])
                adaptations.append(
                    f"{logical}: EventPattern passed as text (moto's handler expects a string)"
                )
        if resource["Type"] == "AWS::KMS::Key" and props.get("Tags"):
            props["Tags"] = [{"TagKey": t["Key"], "TagValue": t["Value"]} for t in props["Tags"]]
            adaptations.append(
                f"{logical}: tags in the KMS API's TagKey/TagValue shape (moto passes them on)"
            )
    return adaptations


# ---- moto --------------------------------------------------------------------------------------------------


class MotoCloud:
    """A moto server on loopback, for one emulated deployment."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log would drown the report
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    def __enter__(self) -> MotoCloud:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.reset()
        return self

    def __exit__(self, *_exc: object) -> None:
        try:
            self.reset()
        finally:
            self._server.stop()

    def reset(self) -> None:
        """moto keeps its state in the process, not the server: an earlier emulated deployment in this process
        would still be there (same stack name, same bucket) without a reset."""
        import urllib.request

        urllib.request.urlopen(
            urllib.request.Request(self.endpoint + "/moto-api/reset", method="POST"), timeout=30
        ).close()

    def client(self, service: str, retries: int = 1) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="acceptance",
            aws_secret_access_key="acceptance",
            config=Config(retries={"max_attempts": retries, "mode": "standard"}, read_timeout=120),
        )


def deploy(cloud: MotoCloud, synth: Synth, template: dict[str, Any]) -> str:
    """What `cdk deploy` does with the Default synthesizer: the bootstrap version parameter, each asset in the
    bootstrap bucket, then the stack, waited for. Returns the stack status; a refused template raises."""
    account = cloud.client("sts").get_caller_identity()["Account"]
    cloud.client("ssm").put_parameter(
        Name=BOOTSTRAP_VERSION_PARAMETER, Value=BOOTSTRAP_VERSION, Type="String", Overwrite=True
    )
    s3, buckets = cloud.client("s3"), set()
    for asset in synth.assets:
        bucket = asset.bucket.replace("${AWS::AccountId}", account).replace("${AWS::Region}", REGION)
        if bucket not in buckets:
            with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
                s3.create_bucket(Bucket=bucket)
            buckets.add(bucket)
        s3.put_object(Bucket=bucket, Key=asset.key, Body=asset.path.read_bytes())
    cfn = cloud.client("cloudformation")
    _quiet_moto()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfn.create_stack(
            StackName=synth.stack_name,
            TemplateBody=json.dumps(template),
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
        )
    deadline = time.monotonic() + STACK_TIMEOUT_SECONDS
    while True:
        status = cfn.describe_stacks(StackName=synth.stack_name)["Stacks"][0]["StackStatus"]
        if not status.endswith("_IN_PROGRESS") or time.monotonic() > deadline:
            return str(status)
        time.sleep(0.2)


def stack_outputs(cloud: MotoCloud, stack_name: str) -> dict[str, str | None]:
    try:
        stack = cloud.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    except Exception:  # no stack at all: nothing to start a runner in front of
        return {}
    return {o["OutputKey"]: o.get("OutputValue") for o in stack.get("Outputs", [])}


def deployed_environment(cloud: MotoCloud, outputs: Mapping[str, str | None]) -> dict[str, str]:
    """The environment the deployment gives its functions (all of them: the runner serves every route in one
    process), read back from Lambda. Two functions disagreeing on a variable is an error."""
    lam, merged = cloud.client("lambda"), {}
    for function in (*FUNCTIONS, names.AUTHORIZER_FUNCTION):
        name = outputs.get(names.function_output_key(function))
        if not name:
            continue
        env = lam.get_function_configuration(FunctionName=name).get("Environment", {}).get("Variables", {})
        for key, value in env.items():
            if merged.setdefault(key, value) != value:
                raise ValueError(
                    f"the functions disagree on {key}: the local runner cannot serve them as one"
                )
    return merged


# ---- the runner from the built packages --------------------------------------------------------------------


def unpack(built: Mapping[str, BuiltPackage], into: Path) -> dict[str, Path]:
    """Unzip functions.zip (as /var/task) and the core layer (as /opt), after checking each zip's bytes are
    the ones digests.json names. The deps layer holds wheels compiled for Lambda (linux/arm64, CPython 3.13),
    which this interpreter cannot load: the runner uses the virtualenv's copies of the same pinned
    versions."""
    import hashlib

    places = {"functions": into / "task", "core_layer": into / "opt"}
    for key, where in places.items():
        package = built[key]
        data = package.path.read_bytes()
        if hashlib.sha256(data).hexdigest() != package.sha256:
            raise ValueError(f"{package.path} is not the zip digests.json describes: run `make build` again")
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            archive.extractall(where)
    runner = into / "runner"
    for package in RUNNER_PACKAGES:
        # Where the package's source is (the client distribution lives in client/src).
        source = Path(importlib.util.find_spec(package).origin or "").parent  # type: ignore[union-attr]
        shutil.copytree(source, runner / package, ignore=shutil.ignore_patterns("__pycache__"))
    return {"task": places["functions"], "layer": places["core_layer"] / "python", "runner": runner}


class PackagedRunner:
    """`sentinel serve` in a child process, importing `sentinel_service` and `sentinel_domain` only from the
    unzipped packages (sentinel_acceptance/packaged_runner.py), against the emulated stack's tables."""

    def __init__(
        self, places: Mapping[str, Path], environment: Mapping[str, str], endpoint: str, event_log: Path
    ) -> None:
        self.places, self.environment, self.endpoint, self.event_log = (
            places,
            environment,
            endpoint,
            event_log,
        )
        self.process: subprocess.Popen[str] | None = None
        self.packaged: dict[str, Any] = {}
        self.banner: dict[str, Any] = {}
        self._stderr = tempfile.TemporaryFile(mode="w+")

    def __enter__(self) -> PackagedRunner:
        command = [
            sys.executable,
            "-I",
            str(Path(__file__).with_name("packaged_runner.py")),
            "--task",
            str(self.places["task"]),
            "--layer",
            str(self.places["layer"]),
            "--runner",
            str(self.places["runner"]),
            "--",
            "serve",
            "--dynamodb-endpoint",
            self.endpoint,
            "--event-log",
            str(self.event_log),
        ]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=dict(self.environment),
            cwd=str(self.places["runner"]),
        )
        try:
            self.packaged = self._line()["packaged_runner"]
            self.banner = self._line()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _line(self) -> dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        deadline = time.monotonic() + RUNNER_START_SECONDS
        line = self.process.stdout.readline()
        if not line or time.monotonic() > deadline:
            self._stderr.seek(0)
            raise RuntimeError(f"the packaged runner did not start: {self._stderr.read().strip()[-2000:]}")
        return dict(json.loads(line))

    def __exit__(self, *_exc: object) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process and self.process.stdout:
            self.process.stdout.close()
        self._stderr.close()


def runner_environment(
    deployed: Mapping[str, str],
    key_file: Path,
    home: Path,
    chain_key_file: Path | None = None,
    data_dir: Path | None = None,
) -> dict[str, str]:
    """The deployed functions' environment, as the runner must see it. Two changes, both reported: the token
    and chain keys come from files (moto's CloudFormation creates no Secrets Manager secret), and the runtime
    is `local` (health must not claim to be Lambda; the runner keeps its witness in its data directory, and
    signs receipts with the key file there: moto's KMS key is not reachable from the runner)."""
    secrets_arns = {names.ENV_TOKEN_KEY_SECRET_ARN, names.ENV_CHAIN_KEY_SECRET_ARN, names.ENV_WITNESS_BUCKET}
    secrets_arns |= {names.ENV_RECEIPT_KEY_ID, *FORGE_SECRETS}
    env = {k: v for k, v in deployed.items() if k not in secrets_arns}
    if chain_key_file is not None:
        env["SENTINEL_CHAIN_KEY_FILE"] = str(chain_key_file)
        env[names.ENV_GITHUB_WEBHOOK_SECRET_FILE] = str(webhook_secret_file(chain_key_file))
    if data_dir is not None:
        env["SENTINEL_DATA_DIR"] = str(data_dir)
    env.update(
        {
            names.ENV_RUNTIME: "local",
            "SENTINEL_TOKEN_KEY_FILE": str(key_file),
            "HOME": str(home),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "acceptance",
            "AWS_SECRET_ACCESS_KEY": "acceptance",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


# ---- one local acceptance run ------------------------------------------------------------------------------


@dataclass
class LocalRun:
    """Hooks for tests that change the emulated deployment; the defaults deploy exactly what was built."""

    tamper_template: Callable[[dict[str, Any]], None] = lambda _t: None  # the synthesized template, in place
    tamper_assets: Callable[[list[Asset]], None] = lambda _a: None
    project: str = DEFAULT_PROJECT
    expect_mode: str = "auto"
    timings: dict[str, int] = field(default_factory=dict)
    # Called once the run is over, before the emulated cloud stops: (cloud, stack outputs, event log path).
    after_run: Callable[[Any, dict[str, Any], Path], None] = lambda _c, _o, _e: None


def run_local(
    build_dir: Path,
    reports_dir: Path,
    synth: Synth,
    options: LocalRun | None = None,
    say: Callable[[str], None] = print,
) -> Any:
    """Create the synthesized stack on a fresh moto server, start the packaged runner in front of it, and run
    the acceptance gate against that emulated deployment. Returns gate.Outcome."""
    from . import gate

    options = options or LocalRun()
    built = read_build(build_dir)
    template = json.loads(json.dumps(synth.template))
    options.tamper_template(template)
    assets = [Asset(a.bucket, a.key, a.path) for a in synth.assets]
    options.tamper_assets(assets)
    adapted, skipped, adaptations = adapt(template)
    emulation = Emulation(template=template, skipped=skipped, adaptations=adaptations)
    clock = time.monotonic()

    def lap(name: str) -> None:
        nonlocal clock
        options.timings[name] = int((time.monotonic() - clock) * 1000)
        clock = time.monotonic()

    emulation.runner["timings_ms"] = options.timings
    with MotoCloud() as cloud, tempfile.TemporaryDirectory(prefix="sentinel-acceptance-") as scratch:
        target = Target(
            kind=EMULATION,
            stack_name=synth.stack_name,
            region=REGION,
            build_dir=Path(build_dir),
            project=options.project,
            expect_mode=options.expect_mode,
            endpoint_url=cloud.endpoint,
            env={},
            emulation=emulation,
        )
        try:
            status = deploy(cloud, Synth(synth.stack_name, template, assets, synth.outdir), adapted)
            say(f"emulated deployment: {synth.stack_name} {status} on {cloud.endpoint}")
        except Exception as error:  # a deployment that breaks off: acceptance reads what it left behind
            emulation.runner["deploy_error"] = f"{type(error).__name__}: {str(error)[:300]}"
            say(f"emulated deployment broke off: {emulation.runner['deploy_error']}")
        lap("deploy")
        outputs = stack_outputs(cloud, synth.stack_name)
        if not outputs.get(names.OUTPUT_STATE_TABLE):
            emulation.runner["started"] = False
            emulation.runner["reason"] = "the stack has no state table output: no runner was started"
            return gate.run(target, reports_dir, say)
        home = Path(scratch) / "home"
        home.mkdir()
        key_file = Path(scratch) / "token.key"
        descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        # The chain key too comes from a file (no Secrets Manager secret in moto's CloudFormation): the
        # operator's project-chain events and the runner's are authenticated under the same one.
        chain_key_file = Path(scratch) / "chain.key"
        descriptor = os.open(chain_key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        # The runner's data directory, where it keeps its witness (one per state table).
        runner_data = Path(scratch) / "runner-data"
        runner_data.mkdir(mode=0o700)
        witness_file = runner_data / f"witness-{outputs[names.OUTPUT_STATE_TABLE]}.jsonl"
        operator = operator_runtime(
            outputs, REGION, cloud.endpoint, str(key_file), str(chain_key_file), str(witness_file)
        )
        minted = mint(operator, options.project, parse_duration(DEFAULT_TTL))
        # The same code path as a live run: the tokens reach the suite as environment variables.
        target.env = {
            f"SENTINEL_ACCEPTANCE_TOKEN_{role.upper()}": token for role, token in minted.tokens.items()
        }
        lap("mint")
        places = unpack(built, Path(scratch) / "packages")
        environment = runner_environment(
            deployed_environment(cloud, outputs), key_file, home, chain_key_file, runner_data
        )
        with PackagedRunner(places, environment, cloud.endpoint, Path(scratch) / "events.jsonl") as runner:
            lap("runner_start")
            target.api_url = runner.banner["url"]
            emulation.runner.update(
                {
                    "started": True,
                    "url": runner.banner["url"],
                    "store": runner.banner.get("dynamodb_endpoint"),
                    "imports": {
                        k: _relative(v, Path(scratch))
                        for k, v in runner.packaged.items()
                        if k in ("sentinel_service", "sentinel_domain", "sentinel_runner")
                    },
                    "modules_from_packages": runner.packaged.get("modules"),
                    "runtime_override": "SENTINEL_RUNTIME=local; token key from a file (no Secrets Manager "
                    "secret); receipts signed with the runner's key file, not the stack's KMS key",
                    "deps_layer": "digest checked in Lambda; not loadable here (linux/arm64 CPython 3.13 "
                    "wheels): the runner uses the virtualenv's copies of the same pinned versions",
                }
            )
            outcome = gate.run(target, reports_dir, say)
            lap("checks")
        retire(operator)  # as `make acceptance` does after a live run
        options.after_run(cloud, outputs, Path(scratch) / "events.jsonl")
        return outcome


def _relative(path: str | None, scratch: Path) -> str | None:
    if not path:
        return path
    real = Path(path)
    return (
        f"<scratch>/{real.relative_to(scratch.resolve())}" if real.is_relative_to(scratch.resolve()) else path
    )
