"""Lambda entry point of the forge function: the GitHub webhook route, from the one route table."""

from sentinel_service.compose import lambda_services
from sentinel_service.http.entry import lambda_handler

handler = lambda_handler("forge", lambda_services)
