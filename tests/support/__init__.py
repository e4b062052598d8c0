"""Helpers shared by the test layers: import them as `from support.world import World` (pyproject puts tests/
on the path). Fixtures stay in the conftest.py nearest the tests that use them."""
