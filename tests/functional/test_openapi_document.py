"""The OpenAPI document comes from the one route table and matches what the service serves."""

from sentinel_service.http.openapi_document import openapi_document
from sentinel_service.http.routes import ROUTES


def test_every_route_is_documented_and_nothing_else() -> None:
    doc = openapi_document()
    documented = {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}
    assert documented == {(r.method, r.path) for r in ROUTES}


def test_only_health_the_document_itself_the_receipt_keys_and_the_signed_webhook_are_anonymous() -> None:
    doc = openapi_document()
    anonymous = sorted(
        path for path, ops in doc["paths"].items() for op in ops.values() if op["security"] == []
    )
    assert anonymous == ["/v1/forge/github/webhook", "/v1/health", "/v1/keys", "/v1/openapi.json"]
    webhook = doc["paths"]["/v1/forge/github/webhook"]["post"]["responses"]
    assert {"200", "202", "400", "401", "413", "422"} <= set(webhook)


def test_a_recorded_decision_documents_its_receipt() -> None:
    # Given the document's schema of a recorded decision
    schemas = openapi_document()["components"]["schemas"]
    recorded = schemas["DecisionRecorded"]
    # Then it names the receipt, an object or null, and requires it as every other field
    assert "receipt" in recorded["properties"] and "receipt" in recorded["required"]
    # And the keys route answers key id, algorithm and public key
    assert set(schemas["PublicKey"]["required"]) == {"key_id", "algorithm", "public_key"}


def test_refusals_are_documented_as_problem_documents() -> None:
    doc = openapi_document()
    review = doc["paths"]["/v1/projects/{project}/candidates/{candidate_id}/reviews"]["post"]["responses"]
    assert review["422"]["content"]["application/problem+json"]["schema"] == {
        "$ref": "#/components/schemas/Problem"
    }
    assert {"401", "403", "404", "409", "413", "429", "503", "201"} <= set(review)
    assert "HTTPValidationError" not in doc["components"]["schemas"]


def test_the_served_document_is_the_generated_one(api) -> None:
    status, _h, served = api.call("GET", "/v1/openapi.json", as_=None)
    assert status == 200 and served == openapi_document()
