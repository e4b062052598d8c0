"""Lambda entry point of the forge worker: forge outbox items from the bus (sentinel_service.forge_worker)."""

from sentinel_service.compose import lambda_services
from sentinel_service.forge_worker import worker_handler

handler = worker_handler(lambda_services)
