# Acceptance verbs: the live gate after a deploy (`make deploy` runs `make acceptance` and fails with it), and
# the same gate against an emulated deployment: the synthesized stack created on a moto server on loopback,
# the HTTP checks against the local runner started from the built packages. Each run writes
# build/acceptance-reports/attempt-NNNN.json (git-ignored with build/). See docs/acceptance.md.
#
# ACCEPTANCE_TARGET  which stack, for both mint and run, e.g. "--stack Sentinel-prod --region eu-west-1"
#                    (default: the stack in build/stack-outputs.json, and your AWS region)
# ACCEPTANCE_MINT    1 (default): issue the acceptance principals fresh one-hour tokens with your own AWS
#                    credentials first (stored in Secrets Manager); 0: read SENTINEL_ACCEPTANCE_TOKEN_* or
#                    the secret as they are
# ACCEPTANCE_FLAGS   more options for the run, e.g. "--expect-mode model"
ACCEPTANCE_TARGET ?=
ACCEPTANCE_MINT ?= 1
ACCEPTANCE_FLAGS ?=

.PHONY: acceptance acceptance-local acceptance-tokens

# Minted tokens live 15 minutes (a run takes a few) and are voided right after the run, passed or failed.
acceptance: setup
	@if [ "$(ACCEPTANCE_MINT)" = "1" ]; then $(BIN)/python -m sentinel_acceptance mint --ttl 15m $(ACCEPTANCE_TARGET); fi
	@status=0; $(BIN)/python -m sentinel_acceptance run $(ACCEPTANCE_TARGET) $(ACCEPTANCE_FLAGS) || status=$$?; \
	if [ "$(ACCEPTANCE_MINT)" = "1" ]; then $(BIN)/python -m sentinel_acceptance retire $(ACCEPTANCE_TARGET) || status=1; fi; \
	exit $$status

acceptance-tokens: setup
	$(BIN)/python -m sentinel_acceptance mint $(ACCEPTANCE_TARGET)

acceptance-local: build
	$(BIN)/python -m sentinel_acceptance local $(ACCEPTANCE_FLAGS)
