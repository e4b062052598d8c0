"""The HTTP API: one route per row of sentinel_service.http.routes.ROUTES, the token authorizer on every route
that is not public, throttles on the stage and on each route, and JSON access logs."""

import json
import re
from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from sentinel_infra.config import DeploymentConfig
from sentinel_infra.constructs.service_function import ServiceFunction
from sentinel_service import names
from sentinel_service.http.routes import ROUTES, Route

AUTHORIZATION_HEADER = "$request.header.Authorization"

# What one access log line holds. Only $context variables, never a request header: the Authorization header
# (a bearer token) must never reach a log. The caller is named by the principal id the authorizer found.
ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "apiId": "$context.apiId",
    "requestTime": "$context.requestTime",
    "sourceIp": "$context.identity.sourceIp",
    "userAgent": "$context.identity.userAgent",
    "routeKey": "$context.routeKey",
    "path": "$context.path",
    "protocol": "$context.protocol",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationStatus": "$context.integrationStatus",
    "integrationLatency": "$context.integrationLatency",
    "integrationError": "$context.integrationErrorMessage",
    "errorMessage": "$context.error.message",
    "authorizerError": "$context.authorizer.error",
    "principal": "$context.authorizer.principal_id",
}


def route_key(route: Route) -> str:
    return f"{route.method} {route.path}"


def throttle_class(route: Route) -> str:
    """Which per-route limit applies: anonymous routes, proposals (each may call a model), writes, reads."""
    if route.public:
        return "public"
    if route.method == "POST" and route.path.endswith("/proposals"):
        return "proposal"
    return "write" if route.method in ("POST", "PUT", "PATCH", "DELETE") else "api"


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        functions: Mapping[str, ServiceFunction],
        authorizer: ServiceFunction,
        log_retention: logs.RetentionDays,
        alias: str = names.LIVE_ALIAS,
        unserved: frozenset[str] = frozenset(),
    ) -> None:
        """`unserved`: functions no accepted version of which serves yet (all of them on a stack's first
        deploy): every route that would invoke one (its own, or the authorizer's) is closed, throttled to
        zero, so API Gateway answers 429 without invoking anything until a promote and the deploy after it."""
        super().__init__(scope, construct_id)
        self.unserved = unserved
        # The production API calls the `live` aliases; the acceptance API, the same routes on `next`.
        self.alias_name = alias
        suffix = "" if alias == names.LIVE_ALIAS else f"-{alias}"

        def aliased(fn: ServiceFunction) -> lambda_.Alias:
            return fn.alias if alias == names.LIVE_ALIAS else fn.next_alias

        self.http_api = apigw.HttpApi(
            self,
            "HttpApi",
            api_name=f"sentinel-{config.stage}{suffix}",
            create_default_stage=False,
            description="Sentinel: a fail-closed readiness gate for changes made by coding agents",
        )
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, removal_policy=RemovalPolicy.RETAIN
        )
        self.stage = apigw.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigw.ThrottleSettings(rate_limit=0, burst_limit=0)
            if unserved
            else apigw.ThrottleSettings(rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit),
        )
        # Simple responses carry the principal's roles in the context; the answer is cached per Authorization
        # header for at most authorizerCacheSeconds (30), which is how long a revoked token may still pass.
        self.authorizer = authorizers.HttpLambdaAuthorizer(
            "TokenAuthorizer",
            aliased(authorizer),
            authorizer_name=f"sentinel-{config.stage}{suffix}-token",
            identity_source=[AUTHORIZATION_HEADER],
            response_types=[authorizers.HttpLambdaResponseType.SIMPLE],
            results_cache_ttl=Duration.seconds(config.authorizer_cache_seconds),
        )
        self.integrations = {
            name: integrations.HttpLambdaIntegration(f"{name}-integration", aliased(fn))
            for name, fn in functions.items()
        }
        self.routes: dict[str, apigw.HttpRoute] = {}
        for route in ROUTES:
            self.routes[route_key(route)] = apigw.HttpRoute(
                self,
                "Route" + re.sub(r"[^A-Za-z0-9]+", "_", route_key(route)),
                http_api=self.http_api,
                route_key=apigw.HttpRouteKey.with_(route.path, apigw.HttpMethod(route.method)),
                integration=self.integrations[route.function],
                authorizer=apigw.HttpNoneAuthorizer() if route.public else self.authorizer,
            )
        self._configure_stage(config)
        self._acknowledge_public_routes()

    def _configure_stage(self, config: DeploymentConfig) -> None:
        stage = self.stage.node.default_child
        assert isinstance(stage, apigw.CfnStage)
        stage.access_log_settings = apigw.CfnStage.AccessLogSettingsProperty(
            destination_arn=cdk.Stack.of(self).format_arn(
                service="logs",
                resource="log-group",
                resource_name=self.access_logs.log_group_name,
                arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
            ),
            format=json.dumps(ACCESS_LOG_FORMAT, separators=(",", ":")),
        )
        limits = {
            name: (getattr(config, f"{name}_rate_limit"), getattr(config, f"{name}_burst_limit"))
            for name in ("api", "write", "proposal", "public")
        }
        limits["closed"] = (0, 0)
        stage.route_settings = {
            key: {
                "ThrottlingRateLimit": limits[self.route_class(route)][0],
                "ThrottlingBurstLimit": limits[self.route_class(route)][1],
            }
            for route in ROUTES
            for key in [route_key(route)]
        }
        # Route settings name route keys, which must exist before the stage refers to them.
        for route in self.routes.values():
            self.stage.node.add_dependency(route)

    def route_class(self, route: Route) -> str:
        """The route's throttle class, or `closed` while what it invokes has no accepted version serving."""
        authorized = not route.public
        if route.function in self.unserved or (authorized and names.AUTHORIZER_FUNCTION in self.unserved):
            return "closed"
        return throttle_class(route)

    def _acknowledge_public_routes(self) -> None:
        for route in ROUTES:
            if not route.public:
                continue
            reason = (
                f"{route_key(route)} takes no bearer token by contract: GitHub signs each delivery "
                "(X-Hub-Signature-256, HMAC-SHA256 under the webhook secret), and the forge function "
                "refuses any body whose signature does not verify before reading it (401); the body is "
                "bounded, deliveries are de-duplicated, and the route has its own low throttle."
                if route.function == names.FORGE_FUNCTION
                else f"{route_key(route)} is anonymous by contract (API.md): health and the OpenAPI "
                "document must answer without a token. It reads nothing a caller could misuse (never a "
                "secret, token or account id), and has its own low throttle."
            )
            cdk.Validations.of(self.routes[route_key(route)]).acknowledge(
                cdk.Acknowledgment(id="AwsSolutions-APIG4", reason=reason)
            )

    @property
    def url(self) -> str:
        """The API base without /v1 and without a trailing slash."""
        return self.http_api.api_endpoint
