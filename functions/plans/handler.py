"""Lambda entry point of the plans function: its routes come from the one route table."""

from functions.shared.routes import lambda_handler

handler = lambda_handler("plans")
