# Benchmarks: they print and record figures, they are not timed tests (see docs/benchmarks.md).
# Results go to bench/results/ (report.json, report.md and one JSON per section), which git ignores.
.PHONY: bench bench-quick bench-docs

bench: setup
	BENCH_COMMAND="make bench" $(BIN)/python -m bench

# A smoke run: fewer repetitions and smaller sizes (under a minute and a half).
bench-quick: setup
	BENCH_COMMAND="make bench-quick" $(BIN)/python -m bench --quick

# The whole run, then the figures block of docs/benchmarks.md refreshed from it.
bench-docs: setup
	BENCH_COMMAND="make bench-docs" $(BIN)/python -m bench --docs docs/benchmarks.md
