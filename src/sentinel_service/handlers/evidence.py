"""Lambda entry point of the evidence function: its routes come from the one route table."""

from sentinel_service.compose import lambda_services
from sentinel_service.http.entry import lambda_handler

handler = lambda_handler("evidence", lambda_services)
