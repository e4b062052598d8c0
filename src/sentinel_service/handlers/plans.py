"""Lambda entry point of the plans function: its routes come from the one route table."""

from sentinel_service.http.routes import lambda_handler

handler = lambda_handler("plans")
