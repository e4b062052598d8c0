"""Lambda entry point of the forge check publisher: forge_check outbox items and the 5-minute sweep."""

from sentinel_service.compose import lambda_services
from sentinel_service.forge_publishing import publisher_handler

handler = publisher_handler(lambda_services)
