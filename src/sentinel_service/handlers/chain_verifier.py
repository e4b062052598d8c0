"""Lambda entry point of the scheduled chain verifier: every chain changed since its last run, against the
witness."""

from sentinel_service.witnessing import lambda_integrity, verifier_handler

handler = verifier_handler(lambda_integrity)
