"""The HTTP API: routes from the one route table, the token authorizer on every route but the three public
ones (health, the OpenAPI document and the receipt keys), throttles on the stage and each route, JSON access
logs without the Authorization header, and nothing else reachable from outside."""

import json
from typing import Any

from sentinel_infra.config import DeploymentConfig
from sentinel_infra.constructs.api import throttle_class
from sentinel_service import names
from sentinel_service.http.routes import ROUTES
from support.infra import Synthesized, as_list, functions_by_name, ref_name

# Health, the document and the receipt keys take no credential at all; the GitHub webhook takes no bearer
# token because GitHub signs each delivery, and the forge function refuses what does not verify.
PUBLIC = {"GET /v1/health", "GET /v1/openapi.json", "GET /v1/keys", "POST /v1/forge/github/webhook"}


def api_ids(synth: Synthesized) -> dict[str, str]:
    """{alias the API calls: its logical id}: the production API (`live`) and the acceptance API (`next`)."""
    found = {}
    for logical_id, api in synth.of_type("AWS::ApiGatewayV2::Api").items():
        name = api["Properties"]["Name"]
        found[names.NEXT_ALIAS if name.endswith(f"-{names.NEXT_ALIAS}") else names.LIVE_ALIAS] = logical_id
    return found


def of_api(synth: Synthesized, kind: str, alias: str) -> dict[str, dict[str, Any]]:
    """{logical id: properties} of the resources of one kind that belong to one of the two APIs."""
    api = api_ids(synth)[alias]
    return {
        k: r["Properties"]
        for k, r in synth.of_type(kind).items()
        if ref_name(r["Properties"]["ApiId"]) == api
    }


def routes(synth: Synthesized, alias: str = names.LIVE_ALIAS) -> dict[str, dict[str, Any]]:
    return {p["RouteKey"]: p for p in of_api(synth, "AWS::ApiGatewayV2::Route", alias).values()}


def stage(synth: Synthesized, alias: str = names.LIVE_ALIAS) -> dict[str, Any]:
    (only,) = of_api(synth, "AWS::ApiGatewayV2::Stage", alias).values()
    return only


def alias_targets(synth: Synthesized) -> dict[str, tuple[str, str]]:
    """{alias logical id: (function name, alias name)}."""
    function_of_logical_id = {logical_id: name for name, (logical_id, _) in functions_by_name(synth).items()}
    return {
        k: (function_of_logical_id[ref_name(v["Properties"]["FunctionName"])], v["Properties"]["Name"])
        for k, v in synth.of_type("AWS::Lambda::Alias").items()
    }


def test_the_routes_are_exactly_the_route_table(synthesized: Synthesized) -> None:
    # Given the two APIs: production, and the acceptance API a deploy is checked through before promotion
    assert set(api_ids(synthesized)) == {names.LIVE_ALIAS, names.NEXT_ALIAS}
    assert len(synthesized.of_type("AWS::ApiGatewayV2::Api")) == 2
    for alias in (names.LIVE_ALIAS, names.NEXT_ALIAS):
        # Then each one's routes are the route table, with no catch-all
        assert set(routes(synthesized, alias)) == {f"{r.method} {r.path}" for r in ROUTES}
        assert "$default" not in routes(synthesized, alias)


def test_each_route_reaches_its_own_function_production_on_live_and_acceptance_on_next(
    synthesized: Synthesized,
) -> None:
    # Given the integrations of each API and which function alias each one invokes
    aliases = alias_targets(synthesized)
    for alias in (names.LIVE_ALIAS, names.NEXT_ALIAS):
        integrations = {}
        for logical_id, props in of_api(synthesized, "AWS::ApiGatewayV2::Integration", alias).items():
            assert (props["IntegrationType"], props["PayloadFormatVersion"]) == ("AWS_PROXY", "2.0")
            integrations[logical_id] = aliases[ref_name(props["IntegrationUri"])]
        by_key = routes(synthesized, alias)
        for route in ROUTES:
            # When a route is looked up, then its target is the integration of the function the table names,
            # through the alias its API serves: `live` for production, `next` for acceptance
            target = by_key[f"{route.method} {route.path}"]["Target"]["Fn::Join"][1][1]
            assert integrations[ref_name(target)] == (route.function, alias)


def test_the_authorizer_guards_every_route_but_health_the_document_the_keys_and_the_webhook(
    synthesized: Synthesized,
) -> None:
    # Given the production API's one authorizer and every route
    (authorizer_id,) = of_api(synthesized, "AWS::ApiGatewayV2::Authorizer", names.LIVE_ALIAS)
    for key, route in routes(synthesized).items():
        if key in PUBLIC:
            # Then the public routes take no token
            assert route["AuthorizationType"] == "NONE" and "AuthorizerId" not in route, key
        else:
            # And every other route needs the token authorizer
            assert route["AuthorizationType"] == "CUSTOM", key
            assert ref_name(route["AuthorizerId"]) == authorizer_id, key
    # And the route table agrees on what is public
    assert {f"{r.method} {r.path}" for r in ROUTES if r.public} == PUBLIC


def test_the_authorizer_reads_the_authorization_header_with_simple_responses_cached_30_seconds(
    synthesized: Synthesized,
) -> None:
    # Given the production API's authorizer
    (authorizer,) = of_api(synthesized, "AWS::ApiGatewayV2::Authorizer", names.LIVE_ALIAS).values()
    # Then it is a payload 2.0 Lambda REQUEST authorizer on the Authorization header, with simple responses
    assert authorizer["AuthorizerType"] == "REQUEST"
    assert authorizer["AuthorizerPayloadFormatVersion"] == "2.0"
    assert authorizer["EnableSimpleResponses"] is True
    assert authorizer["IdentitySource"] == ["$request.header.Authorization"]
    # And its answers are cached for at most 30 seconds: the documented revocation window
    assert authorizer["AuthorizerResultTtlInSeconds"] == 30
    # And it calls the authorizer function's live alias, and the acceptance API's the next alias
    for alias in (names.LIVE_ALIAS, names.NEXT_ALIAS):
        (uri,) = [
            a["AuthorizerUri"] for a in of_api(synthesized, "AWS::ApiGatewayV2::Authorizer", alias).values()
        ]
        (alias_id,) = [
            k
            for k, target in alias_targets(synthesized).items()
            if target == (names.AUTHORIZER_FUNCTION, alias)
        ]
        assert json.dumps(uri).count(alias_id) == 1


def test_the_stage_and_every_route_are_throttled(synthesized: Synthesized) -> None:
    # Given the deployment's defaults and the stage
    config = DeploymentConfig()
    props = stage(synthesized)
    # Then the stage as a whole is throttled
    assert props["DefaultRouteSettings"] == {
        "ThrottlingRateLimit": config.api_rate_limit,
        "ThrottlingBurstLimit": config.api_burst_limit,
    }
    # And each route has its own limit: anonymous routes and proposals lowest, writes below reads
    settings = props["RouteSettings"]
    assert set(settings) == set(routes(synthesized))
    for route in ROUTES:
        limits = settings[f"{route.method} {route.path}"]
        kind = throttle_class(route)
        assert (limits["ThrottlingRateLimit"], limits["ThrottlingBurstLimit"]) == (
            getattr(config, f"{kind}_rate_limit"),
            getattr(config, f"{kind}_burst_limit"),
        )
    proposals = settings["POST /v1/projects/{project}/candidates/{candidate_id}/proposals"]
    assert proposals["ThrottlingRateLimit"] == config.proposal_rate_limit
    assert settings["GET /v1/health"]["ThrottlingRateLimit"] == config.public_rate_limit


def test_access_logs_are_json_and_never_carry_the_authorization_header(synthesized: Synthesized) -> None:
    # Given the stage's access log settings
    settings = stage(synthesized)["AccessLogSettings"]
    log_format = json.loads(settings["Format"])
    # Then each line is a JSON object of $context variables only: no request header can reach the log
    assert all(isinstance(v, str) and v.startswith("$context.") for v in log_format.values())
    assert "authorization" not in settings["Format"].lower().replace("authorizer", "")
    assert "$request" not in settings["Format"] and "header" not in settings["Format"].lower()
    # And they name the caller by principal id, and what the metric filter counts
    assert {"status", "integrationStatus", "principal", "apiId", "routeKey"} <= set(log_format)
    # And they go to a log group of this stack
    destination = json.dumps(settings["DestinationArn"])
    assert any(group in destination for group in synthesized.of_type("AWS::Logs::LogGroup"))


def test_nothing_is_public_but_the_health_openapi_keys_and_signed_webhook_routes(
    synthesized: Synthesized,
) -> None:
    # Given every resource of the stack
    kinds = {r["Type"] for r in synthesized.resources.values()}
    # Then nothing is reachable from outside except through the API: no function URL, domain or second API,
    # and the one bucket (the witness) blocks every kind of public access
    for bucket in synthesized.properties("AWS::S3::Bucket"):
        assert set(bucket["PublicAccessBlockConfiguration"].values()) == {True}
    assert not kinds & {
        "AWS::Lambda::Url",
        "AWS::ApiGatewayV2::DomainName",
        "AWS::ApiGateway::RestApi",
        "AWS::CloudFront::Distribution",
        "AWS::Events::EventBusPolicy",
    }
    # And only API Gateway of this stack's two APIs may invoke a function, on a named route or as the
    # authorizer; production only the `live` aliases, acceptance only the `next` ones (the one exception: the
    # verifier's schedule, tests/infrastructure/test_stack_integrity.py; the forge worker's rule on the
    # Sentinel bus, which only the outbox relay's pipe feeds: tests/infrastructure/test_stack_forge.py; and
    # the forge check publisher's rule on the bus and its schedule, test_stack_forge_checks.py)
    aliases = alias_targets(synthesized)
    rules = synthesized.of_type("AWS::Events::Rule")
    assert len(rules) == 4
    invoked_by_rules = {}
    for permission in synthesized.properties("AWS::Lambda::Permission"):
        if permission["Principal"] == "events.amazonaws.com":
            assert ref_name(permission["SourceArn"]) in rules
            invoked_by_rules[ref_name(permission["SourceArn"])] = aliases[
                ref_name(permission["FunctionName"])
            ]
            continue
        assert permission["Principal"] == "apigateway.amazonaws.com"
        (api_alias,) = [
            a for a, api in api_ids(synthesized).items() if api in json.dumps(permission["SourceArn"])
        ]
        assert aliases[ref_name(permission["FunctionName"])][1] == api_alias
    # And no resource policy allows anyone at all
    for kind in (
        "AWS::SQS::QueuePolicy",
        "AWS::SNS::TopicPolicy",
        "AWS::KMS::Key",
        "AWS::SecretsManager::Secret",
    ):
        for props in synthesized.properties(kind):
            document = props.get("PolicyDocument") or props.get("KeyPolicy") or {"Statement": []}
            for statement in document["Statement"]:
                if statement["Effect"] == "Allow":
                    principals = (
                        as_list(statement["Principal"].get("AWS", []))
                        if isinstance(statement["Principal"], dict)
                        else [statement["Principal"]]
                    )
                    assert "*" not in principals, (kind, statement)
    # And the rules invoke only the verifier and the forge worker, on their live aliases
    assert sorted(invoked_by_rules.values()) == [
        (names.CHAIN_VERIFIER_FUNCTION, names.LIVE_ALIAS),
        (names.FORGE_CHECKS_FUNCTION, names.LIVE_ALIAS),
        (names.FORGE_CHECKS_FUNCTION, names.LIVE_ALIAS),
        (names.FORGE_WORKER_FUNCTION, names.LIVE_ALIAS),
    ]
    # And the only routes without the authorizer are the public ones (GET /v1/keys answers public keys only:
    # what a deploy step needs to check a receipt offline; the webhook refuses what GitHub did not sign)
    assert {k for k, r in routes(synthesized).items() if r["AuthorizationType"] == "NONE"} == PUBLIC
