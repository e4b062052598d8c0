"""Lambda entry point of the witness writer: checkpoint outbox items and chain changes from the stream."""

from sentinel_service.witnessing import lambda_integrity, writer_handler

handler = writer_handler(lambda_integrity)
