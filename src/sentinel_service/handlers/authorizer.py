"""Lambda entry point of the token authorizer (no pydantic, no use case: only the principal directory)."""

from sentinel_service.compose import lambda_services
from sentinel_service.http.authorizer import make_authorizer

handler = make_authorizer(lambda_services)
