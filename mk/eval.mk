# Evaluation verbs: the scenario catalog (evaluation/scenarios/) replayed twice through the real handlers,
# judged by hard gates (docs/evaluation.md). Exits non-zero when any gate fails. `make test` runs the same
# batch through tests/functional/evaluation/; this verb prints the report and its digest.
.PHONY: eval

eval: setup
	$(BIN)/python -m sentinel_evaluation.cli
