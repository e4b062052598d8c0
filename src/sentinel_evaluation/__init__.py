"""The scenario harness: a catalog of fixed scenarios (data, in `evaluation/scenarios/`), each replayed twice
from an isolated fixture through the real handlers behind the emulated API Gateway, judged by hard gates.

`sentinel eval` (or `python -m sentinel_evaluation.cli`) runs the whole batch; docs/evaluation.md defines
every counter and gate."""
