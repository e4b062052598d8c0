"""The HTTP API: routes from the one route table, the token authorizer on every route but the two public
ones, throttles on the stage and each route, JSON access logs without the Authorization header, and nothing
else reachable from outside."""

import json
from typing import Any

from sentinel_infra.config import DeploymentConfig
from sentinel_infra.constructs.api import throttle_class
from sentinel_service import names
from sentinel_service.http.routes import ROUTES
from support.infra import Synthesized, as_list, functions_by_name, ref_name

PUBLIC = {"GET /v1/health", "GET /v1/openapi.json"}


def routes(synth: Synthesized) -> dict[str, dict[str, Any]]:
    return {p["RouteKey"]: p for p in synth.properties("AWS::ApiGatewayV2::Route")}


def stage(synth: Synthesized) -> dict[str, Any]:
    (only,) = synth.properties("AWS::ApiGatewayV2::Stage")
    return only


def test_the_routes_are_exactly_the_route_table(synthesized: Synthesized) -> None:
    # Given the route table and the synthesized routes, then they are the same set, with no catch-all
    assert set(routes(synthesized)) == {f"{r.method} {r.path}" for r in ROUTES}
    assert "$default" not in routes(synthesized)
    assert len(synthesized.of_type("AWS::ApiGatewayV2::Api")) == 1


def test_each_route_reaches_the_alias_of_its_own_function(synthesized: Synthesized) -> None:
    # Given the integrations and which alias each one invokes
    aliases = {
        k: ref_name(v["Properties"]["FunctionName"])
        for k, v in synthesized.of_type("AWS::Lambda::Alias").items()
    }
    function_of_logical_id = {
        logical_id: name for name, (logical_id, _) in functions_by_name(synthesized).items()
    }
    integrations = {}
    for logical_id, integration in synthesized.of_type("AWS::ApiGatewayV2::Integration").items():
        props = integration["Properties"]
        assert (props["IntegrationType"], props["PayloadFormatVersion"]) == ("AWS_PROXY", "2.0")
        integrations[logical_id] = function_of_logical_id[aliases[ref_name(props["IntegrationUri"])]]
    by_key = routes(synthesized)
    for route in ROUTES:
        # When a route is looked up, then its target is the integration of the function the table names
        target = by_key[f"{route.method} {route.path}"]["Target"]["Fn::Join"][1][1]
        assert integrations[ref_name(target)] == route.function


def test_the_authorizer_guards_every_route_but_health_and_the_openapi_document(
    synthesized: Synthesized,
) -> None:
    # Given the one authorizer and every route
    (authorizer_id,) = synthesized.of_type("AWS::ApiGatewayV2::Authorizer")
    for key, route in routes(synthesized).items():
        if key in PUBLIC:
            # Then the two public routes take no token
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
    # Given the authorizer
    (authorizer,) = synthesized.properties("AWS::ApiGatewayV2::Authorizer")
    # Then it is a payload 2.0 Lambda REQUEST authorizer on the Authorization header, with simple responses
    assert authorizer["AuthorizerType"] == "REQUEST"
    assert authorizer["AuthorizerPayloadFormatVersion"] == "2.0"
    assert authorizer["EnableSimpleResponses"] is True
    assert authorizer["IdentitySource"] == ["$request.header.Authorization"]
    # And its answers are cached for at most 30 seconds: the documented revocation window
    assert authorizer["AuthorizerResultTtlInSeconds"] == 30
    # And it calls the authorizer function's live alias
    authorizer_alias = [
        k
        for k, v in synthesized.of_type("AWS::Lambda::Alias").items()
        if ref_name(v["Properties"]["FunctionName"])
        == functions_by_name(synthesized)[names.AUTHORIZER_FUNCTION][0]
    ]
    assert json.dumps(authorizer["AuthorizerUri"]).count(authorizer_alias[0]) == 1


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


def test_nothing_is_public_but_the_health_and_openapi_routes(synthesized: Synthesized) -> None:
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
    # And only API Gateway of this API may invoke a function, on a named route or as the authorizer (the
    # one exception: the verifier's schedule, tests/infrastructure/test_stack_integrity.py)
    (api_id,) = synthesized.of_type("AWS::ApiGatewayV2::Api")
    (rule_id,) = synthesized.of_type("AWS::Events::Rule")
    for permission in synthesized.properties("AWS::Lambda::Permission"):
        if permission["Principal"] == "events.amazonaws.com":
            assert ref_name(permission["SourceArn"]) == rule_id
            continue
        assert permission["Principal"] == "apigateway.amazonaws.com"
        assert api_id in json.dumps(permission["SourceArn"])
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
    # And the only routes without the authorizer are the two public ones
    assert {k for k, r in routes(synthesized).items() if r["AuthorizationType"] == "NONE"} == PUBLIC
