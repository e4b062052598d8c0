# Published JSON Schemas generated from the models (tests/unit/test_apply_file.py checks they are current).
.PHONY: schemas

schemas: setup
	$(BIN)/python -m sentinel_runner.apply_cli --schema --write docs/schemas/sentinel-file.v1.json
