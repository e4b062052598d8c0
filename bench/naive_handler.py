"""The baseline for the cold-start benchmark: a handler built the naive way, everything at module level.

Powertools Logger, Tracer and Metrics, the validating APIGatewayHttpResolver with one pydantic-validated
route, and the idempotency utility over DynamoDBPersistenceLayer with a boto3 DynamoDB client — all imported
and built when the module is imported, as most examples do. Sentinel's handlers are measured against it in
the same run (bench/cold_start.py). It is never deployed and never imported by product code."""

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field

logger = Logger(service="naive")
tracer = Tracer(service="naive")
metrics = Metrics(namespace="Naive", service="naive")
app = APIGatewayHttpResolver(enable_validation=True)
dynamodb = boto3.client("dynamodb")
persistence = DynamoDBPersistenceLayer(table_name="naive-idempotency", boto3_client=dynamodb)
config = IdempotencyConfig(
    event_key_jmespath='headers."idempotency-key"', raise_on_no_idempotency_key=True, hash_function="sha256"
)


class Item(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    quantity: int = Field(ge=1)


@app.post("/items")
@tracer.capture_method
def create_item(item: Item) -> dict:
    dynamodb.put_item(TableName="naive-items", Item={"pk": {"S": item.name}, "n": {"N": str(item.quantity)}})
    return {"name": item.name, "quantity": item.quantity}


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@idempotent(config=config, persistence_store=persistence)
def handler(event: dict, context: LambdaContext) -> dict:
    return app.resolve(event, context)
