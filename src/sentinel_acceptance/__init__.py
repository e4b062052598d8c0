"""The live acceptance gate: after each deploy, prove that the stack that is running is the one that was built
and tested, and that the ready flow of API.md works through it.

`python -m sentinel_acceptance run` checks a deployed stack (`make acceptance`, and `make deploy` after the
deploy); `python -m sentinel_acceptance local` checks the same way an emulated deployment on a moto server,
with the HTTP checks against the local runner started from the built packages (`make acceptance-local`);
`python -m sentinel_acceptance mint` issues the acceptance principals' short-lived tokens. Every run writes an
attempt-numbered JSON report. See docs/acceptance.md.
"""
