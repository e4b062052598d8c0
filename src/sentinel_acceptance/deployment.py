"""The checks that read the deployment itself: what CloudFormation says of the stack, which code each route
invokes (through the `live` alias), and that the alarms and the budget exist.

Against AWS every fact is read from the service that owns it. Against the emulation, moto's CloudFormation
creates no API Gateway, alias, alarm or budget, and attaches no layer: where a fact then has to come from the
synthesized template instead, the evidence says so (`resolved_through`), and what cannot be read at all is
reported "not emulated", never "passed".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from sentinel_service import names
from sentinel_service.http.routes import FUNCTIONS, ROUTES

from .checks import BLOCKED, NOT_EMULATED, UNAVAILABLE, CheckFailed, CheckSkipped
from .target import BuiltPackage, Target

COMPLETE = ("CREATE_COMPLETE", "UPDATE_COMPLETE")
EVERY_FUNCTION = tuple(sorted({*FUNCTIONS, names.AUTHORIZER_FUNCTION}))
LAYER_ARN = re.compile(r"^arn:[^:]+:lambda:[^:]+:\d{12}:layer:(?P<name>[^:]+):(?P<version>\d+)$")
FUNCTION_ARN = re.compile(
    r"^arn:[^:]+:lambda:[^:]+:\d{12}:function:(?P<name>[^:/]+)(?::(?P<qualifier>[^:/]+))?$"
)
DENIED = ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnrecognizedClientException")


@dataclass
class Deployment:
    """What the deployment checks learned, for the checks after them."""

    status: str | None = None
    outputs: dict[str, str | None] = field(default_factory=dict)
    resources: dict[str, tuple[str, str]] = field(default_factory=dict)  # logical id -> (type, physical id)
    environments: dict[str, dict[str, str]] = field(
        default_factory=dict
    )  # function -> env of its live version
    deployed: dict[str, Any] = field(default_factory=dict)  # digests as read from Lambda

    def output(self, key: str) -> str:
        value = self.outputs.get(key)
        if not value:
            raise CheckSkipped(BLOCKED, f"the stack has no {key} output")
        return value

    def physical(self, resource_type: str) -> list[str]:
        return sorted(p for t, p in self.resources.values() if t == resource_type and p)


def _error_code(error: Exception) -> str:
    return str(getattr(error, "response", {}).get("Error", {}).get("Code", type(error).__name__))


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every item of a paged AWS listing (NextToken style), without relying on a paginator moto may lack."""
    token = None
    while True:
        page = getattr(client, operation)(**kwargs, **({"NextToken": token} if token else {}))
        yield from page.get(key, [])
        token = page.get("NextToken")
        if not token:
            return


# ---- stack status ------------------------------------------------------------------------------------------


def stack_status(target: Target, found: Deployment) -> tuple[str, dict[str, Any]]:
    cfn = target.client("cloudformation")
    try:
        stack = cfn.describe_stacks(StackName=target.stack_name)["Stacks"][0]
    except Exception as error:
        raise CheckFailed(
            f"CloudFormation has no readable stack {target.stack_name} ({_error_code(error)})"
        ) from None
    found.status = stack["StackStatus"]
    found.outputs = {o["OutputKey"]: o.get("OutputValue") for o in stack.get("Outputs", [])}
    found.resources = {
        r["LogicalResourceId"]: (r["ResourceType"], r.get("PhysicalResourceId") or "")
        for r in _pages(cfn, "list_stack_resources", "StackResourceSummaries", StackName=target.stack_name)
    }
    evidence = {
        "stack_status": found.status,
        "status_reason": stack.get("StackStatusReason"),
        "last_updated": str(stack.get("LastUpdatedTime") or stack.get("CreationTime")),
        "resources": len(found.resources),
        "outputs": sorted(found.outputs),
    }
    if found.status not in COMPLETE:
        raise CheckFailed(
            f"the stack is {found.status}, not {' or '.join(COMPLETE)}: the last deployment did "
            "not complete, so what runs is not what was built",
            evidence,
        )
    return f"{target.stack_name} is {found.status}", evidence


# ---- which code each route invokes -------------------------------------------------------------------------


def route_integrations(target: Target, found: Deployment) -> tuple[str, dict[str, Any]]:
    """Every route of the route table exists, invokes the `live` alias of the function the table names, and
    has the token authorizer unless it is public; no other route exists."""
    if target.emulation is not None and not target.emulation.emulated("AWS::ApiGatewayV2::Route"):
        raise CheckSkipped(
            NOT_EMULATED,
            "moto's CloudFormation creates no API Gateway (AWS::ApiGatewayV2::*): "
            "routes are served by the local runner's emulated gateway from the packaged route "
            "table, whose refusals auth_refusals checks over HTTP",
        )
    # The stack has two HTTP APIs, production (`live`) and acceptance (`next`): the one checked is the one
    # its URL output names, and it must be one of the stack's own.
    apis = [_api_id(found, target.api_url_output)]
    if apis[0] not in found.physical("AWS::ApiGatewayV2::Api"):
        raise CheckFailed(f"{target.api_url_output} names API {apis[0]}, which is not one of the stack's")
    api = target.client("apigatewayv2")
    routes = {r["RouteKey"]: r for r in _pages(api, "get_routes", "Items", ApiId=apis[0])}
    integrations = {i["IntegrationId"]: i for i in _pages(api, "get_integrations", "Items", ApiId=apis[0])}
    authorizers = {a["AuthorizerId"]: a for a in _pages(api, "get_authorizers", "Items", ApiId=apis[0])}
    function_names = {fn: found.output(names.function_output_key(fn)) for fn in EVERY_FUNCTION}
    expected = {f"{r.method} {r.path}": r for r in ROUTES}
    problems = [
        f"{key}: in the API but not in the route table" for key in sorted(set(routes) - set(expected))
    ]
    problems += [
        f"{key}: in the route table but not in the API" for key in sorted(set(expected) - set(routes))
    ]
    invoked: dict[str, str] = {}
    for key in sorted(set(expected) & set(routes)):
        route, deployed = expected[key], routes[key]
        integration = integrations.get(str(deployed.get("Target", "")).removeprefix("integrations/"), {})
        uri = str(integration.get("IntegrationUri", ""))
        arn = FUNCTION_ARN.match(uri)
        if not arn or arn["name"] != function_names[route.function] or arn["qualifier"] != target.alias:
            problems.append(
                f"{key}: invokes {uri or 'nothing'}, not the {target.alias} alias of "
                f"{function_names[route.function]}"
            )
        else:
            invoked[key] = uri
        kind = deployed.get("AuthorizationType", "NONE")
        if route.public and kind != "NONE":
            problems.append(f"{key}: public by contract but has authorization {kind}")
        if not route.public:
            authorizer = authorizers.get(str(deployed.get("AuthorizerId", "")), {})
            alias = f":function:{function_names[names.AUTHORIZER_FUNCTION]}:{target.alias}/"
            if kind != "CUSTOM" or alias not in str(authorizer.get("AuthorizerUri", "")):
                problems.append(
                    f"{key}: not behind the token authorizer's {target.alias} alias "
                    f"(authorization {kind}) — the route is open"
                )
    evidence = {"api_id": apis[0], "routes": len(routes), "invoked": invoked}
    if problems:
        raise CheckFailed(
            "; ".join(problems[:8]) + (f" (+{len(problems) - 8} more)" if len(problems) > 8 else ""),
            {**evidence, "problems": problems},
        )
    return (
        f"all {len(expected)} routes invoke the {target.alias} alias of their function, every "
        "non-public one behind the token authorizer, and no other route exists",
        evidence,
    )


# ---- the code each function runs ---------------------------------------------------------------------------


def package_digests(
    target: Target, found: Deployment, built: dict[str, BuiltPackage]
) -> tuple[str, dict[str, Any]]:
    """For each function: the version its `live` alias points at runs exactly the built functions zip, with
    exactly the two built layers."""
    lam = target.client("lambda")
    want_code = built["functions"].code_sha256
    want_layers = sorted([built["core_layer"].code_sha256, built["deps_layer"].code_sha256])
    problems: list[str] = []
    deployed: dict[str, Any] = {}
    for function in EVERY_FUNCTION:
        name = found.output(names.function_output_key(function))
        version, how = _live_version(target, found, lam, name)
        config = lam.get_function(FunctionName=name, Qualifier=version)["Configuration"]
        layer_arns, layers_how = _layer_arns(target, found, lam, name, config)
        layers = {arn: _layer_digest(lam, arn) for arn in layer_arns}
        found.environments[function] = dict(config.get("Environment", {}).get("Variables", {}))
        deployed[function] = {
            "function_name": name,
            "version": version,
            "alias_resolved_through": how,
            "code_sha256": config.get("CodeSha256"),
            "layers_resolved_through": layers_how,
            "layers": layers,
        }
        if config.get("CodeSha256") != want_code:
            problems.append(
                f"{function}: version {version} runs CodeSha256 {config.get('CodeSha256')}, the build "
                f"is {want_code}"
            )
        if sorted(layers.values()) != want_layers:
            problems.append(f"{function}: layers {sorted(layers.values())}, the build is {want_layers}")
    found.deployed = deployed
    evidence = {
        "built": {k: {"sha256": p.sha256, "code_sha256": p.code_sha256} for k, p in built.items()},
        "deployed": deployed,
        "package_digest_output": found.outputs.get(names.OUTPUT_PACKAGE_DIGEST),
    }
    if problems:
        raise CheckFailed("what runs is not what was built: " + "; ".join(problems), evidence)
    return (
        f"the {target.alias} version of all {len(EVERY_FUNCTION)} functions runs functions.zip "
        f"{built['functions'].sha256[:16]}… with the two built layers",
        evidence,
    )


def _live_version(target: Target, found: Deployment, lam: Any, function_name: str) -> tuple[str, str]:
    if target.emulation is None or target.emulation.emulated("AWS::Lambda::Alias"):
        alias = lam.get_alias(FunctionName=function_name, Name=target.alias)
        return str(alias["FunctionVersion"]), "lambda:GetAlias"
    # moto creates no alias: follow the template's alias to the version resource it names, then read the one
    # version moto published for that function.
    template = target.emulation.template["Resources"]
    logical = _logical_id(found, function_name)
    aliases = [
        r
        for r in template.values()
        if r["Type"] == "AWS::Lambda::Alias"
        and r["Properties"].get("Name") == target.alias
        and r["Properties"].get("FunctionName") == {"Ref": logical}
    ]
    if len(aliases) != 1:
        raise CheckFailed(f"{function_name}: the template has {len(aliases)} {target.alias} aliases")
    version_ref = aliases[0]["Properties"].get("FunctionVersion", {})
    version_logical = version_ref.get("Fn::GetAtt", [None])[0] if isinstance(version_ref, dict) else None
    if found.resources.get(version_logical or "", ("", ""))[0] != "AWS::Lambda::Version":
        raise CheckFailed(f"{function_name}: the {target.alias} alias names no deployed version")
    published = [
        v["Version"]
        for v in _pages(lam, "list_versions_by_function", "Versions", FunctionName=function_name)
        if v["Version"] != "$LATEST"
    ]
    if len(published) != 1:
        raise CheckFailed(
            f"{function_name}: expected the one version this deployment published, found {published}"
        )
    return published[0], f"template alias -> {version_logical} (moto creates no AWS::Lambda::Alias)"


def _layer_arns(
    target: Target, found: Deployment, lam: Any, function_name: str, config: dict[str, Any]
) -> tuple[list[str], str]:
    if target.emulation is None:
        return [layer["Arn"] for layer in config.get("Layers", [])], "lambda:GetFunction"
    # moto's CloudFormation attaches no layer and reports no layer physical id: follow the template's layer
    # references to the layer versions moto created under the stack's generated names.
    template = target.emulation.template["Resources"]
    refs = template[_logical_id(found, function_name)]["Properties"].get("Layers", [])
    published = list(_pages(lam, "list_layers", "Layers"))
    arns = []
    for ref in refs:
        logical = ref.get("Ref") if isinstance(ref, dict) else None
        matches = [
            layer["LatestMatchingVersion"]["LayerVersionArn"]
            for layer in published
            if layer["LayerName"].startswith(f"{target.stack_name}-{logical}-")
        ]
        if len(matches) != 1:
            raise CheckFailed(f"{function_name}: layer {logical} matches {len(matches)} deployed layers")
        arns.append(matches[0])
    return arns, "template layer references (moto attaches no layer)"


def _layer_digest(lam: Any, arn: str) -> str:
    parts = LAYER_ARN.match(arn)
    if not parts:
        raise CheckFailed(f"not a layer version ARN: {arn}")
    answer = lam.get_layer_version(LayerName=parts["name"], VersionNumber=int(parts["version"]))
    return str(answer["Content"]["CodeSha256"])


def _api_id(found: Deployment, output: str) -> str:
    """The API id in an execute-api URL output (https://<id>.execute-api.<region>.amazonaws.com)."""
    url = found.output(output)
    host = urlparse(url).hostname or ""
    if ".execute-api." not in host:
        raise CheckFailed(f"{output} is {url!r}, not an execute-api URL")
    return host.split(".", 1)[0]


def _logical_id(found: Deployment, physical: str) -> str:
    for logical, (_type, physical_id) in found.resources.items():
        if physical_id == physical:
            return logical
    raise CheckFailed(f"{physical} is not a resource of the stack")


# ---- alarms and budget -------------------------------------------------------------------------------------


def alarms(target: Target, found: Deployment) -> tuple[str, dict[str, Any]]:
    if target.emulation is not None and not target.emulation.emulated("AWS::CloudWatch::Alarm"):
        expected = sum(1 for t in target.emulation.skipped.values() if t == "AWS::CloudWatch::Alarm")
        raise CheckSkipped(
            NOT_EMULATED,
            f"moto's CloudFormation creates no AWS::CloudWatch::Alarm: the "
            f"template's {expected} alarms were not deployed, so none can be read",
            {"alarms_in_template": expected},
        )
    wanted = found.physical("AWS::CloudWatch::Alarm")
    if not wanted:
        raise CheckFailed("the stack has no CloudWatch alarm")
    cloudwatch = target.client("cloudwatch")
    seen: dict[str, Any] = {}
    try:
        for start in range(0, len(wanted), 100):
            for alarm in _pages(
                cloudwatch, "describe_alarms", "MetricAlarms", AlarmNames=wanted[start : start + 100]
            ):
                seen[alarm["AlarmName"]] = alarm
    except Exception as error:
        if _error_code(error) in DENIED:
            raise CheckSkipped(
                UNAVAILABLE, f"cloudwatch:DescribeAlarms is denied ({_error_code(error)})"
            ) from None
        raise
    missing = [name for name in wanted if name not in seen]
    topic = found.outputs.get(names.OUTPUT_ALARM_TOPIC_ARN)
    silent = [name for name, alarm in seen.items() if topic and topic not in alarm.get("AlarmActions", [])]
    evidence = {"alarms": len(wanted), "found": len(seen), "missing": missing, "not_notifying_topic": silent}
    if missing or silent:
        raise CheckFailed(
            f"{len(missing)} alarm(s) missing, {len(silent)} not notifying the alarm topic", evidence
        )
    return f"all {len(wanted)} alarms of the stack exist and notify its topic", evidence


def budget(target: Target, found: Deployment) -> tuple[str, dict[str, Any]]:
    if target.emulation is not None and not target.emulation.emulated("AWS::Budgets::Budget"):
        raise CheckSkipped(NOT_EMULATED, "moto's CloudFormation creates no AWS::Budgets::Budget")
    budgets = found.physical("AWS::Budgets::Budget")
    if len(budgets) != 1:
        raise CheckFailed(f"expected one budget in the stack, found {len(budgets)}")
    try:
        account = target.client("sts").get_caller_identity()["Account"]
        answer = target.client("budgets").describe_budget(AccountId=account, BudgetName=budgets[0])["Budget"]
    except Exception as error:
        if _error_code(error) in DENIED:
            raise CheckSkipped(
                UNAVAILABLE,
                f"budgets:ViewBudget is denied ({_error_code(error)}): the budget "
                "cannot be read with these credentials",
            ) from None
        if _error_code(error) == "NotFoundException":
            raise CheckFailed(f"the budget {budgets[0]} does not exist") from None
        raise
    limit = answer.get("BudgetLimit", {})
    return f"budget {budgets[0]} exists ({limit.get('Amount')} {limit.get('Unit')} a month)", {
        "budget": budgets[0],
        "limit": limit,
        "time_unit": answer.get("TimeUnit"),
    }
