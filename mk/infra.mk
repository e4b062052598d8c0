# Infrastructure verbs: reproducible Lambda packages, synth (cdk-nag and cfn-lint), deploy.
# `build` and `synth` need no AWS credentials and no network beyond PyPI (once: the deps layer's wheels are
# cached in build/cache/). `deploy` uses the AWS CLI credentials of the operator's shell.
CDK_CLI_VERSION := 2.1148.1
CDK := npx --yes aws-cdk@$(CDK_CLI_VERSION)
# Extra CLI flags, e.g. make deploy CDK_FLAGS="-c stage=prod -c alarmEmail=ops@example.com"
CDK_FLAGS ?=
STACK_OUTPUTS := build/stack-outputs.json

.PHONY: build synth deploy deps-lock

build: setup
	$(BIN)/python -m sentinel_infra.packaging build

synth: build
	rm -rf cdk.out
	$(BIN)/python app.py
	@# Linted for every region the template's own region guard accepts (sentinel_infra/regions.py).
	$(BIN)/cfn-lint -i W3005 --regions $$($(BIN)/python -m sentinel_infra.regions cdk.out/*.template.json) \
		-- cdk.out/*.template.json

# Acceptance before traffic (docs/deploy.md): the deploy publishes new versions behind the `next` aliases (the
# acceptance API) and leaves `live` (production) on the versions it serves, read from Lambda first; the gate
# then checks `next`, and only a passing run lets the promote step move `live`. A failing run moves nothing:
# the previous versions keep serving and the attempt report stays in build/acceptance-reports/.
# A function that served no accepted version before the deploy (every function, on a stack's first deploy)
# has its production routes closed (429, nothing invoked); once promoted, a second deploy with the promoted
# versions opens them (it publishes no new version: code and configuration are unchanged).
# With another stage than cdk.json's, name its stack: ACCEPTANCE_TARGET="--stack Sentinel-prod".
LIVE_BEFORE := build/live-before.json
deploy: build
	$(BIN)/python -m sentinel_acceptance live-versions $(ACCEPTANCE_TARGET) > $(LIVE_BEFORE)
	LIVE=$$(cat $(LIVE_BEFORE)) && \
	$(CDK) deploy --all --no-notices --outputs-file $(STACK_OUTPUTS) -c liveVersions="$$LIVE" $(CDK_FLAGS)
	@$(MAKE) acceptance ACCEPTANCE_FLAGS="--alias next $(ACCEPTANCE_FLAGS)" || { \
		echo "deploy: acceptance of the new versions FAILED: live was not moved, the previous versions keep serving (report in build/acceptance-reports/)"; \
		exit 1; }
	$(BIN)/python -m sentinel_acceptance promote $(ACCEPTANCE_TARGET)
	@# Exit 0 when a function serves now that served nothing before: its production routes are still closed.
	LIVE=$$($(BIN)/python -m sentinel_acceptance live-versions $(ACCEPTANCE_TARGET)) && \
	if $(BIN)/python -c 'import json, sys; sys.exit(set(json.loads(sys.argv[1])) <= set(json.load(open(sys.argv[2]))))' \
		"$$LIVE" $(LIVE_BEFORE); then \
		echo "deploy: opening the production routes of functions served for the first time"; \
		$(CDK) deploy --all --no-notices --outputs-file $(STACK_OUTPUTS) -c liveVersions="$$LIVE" $(CDK_FLAGS); \
	fi

# Re-resolve the deps layer's pins after a change to [project].dependencies (needs PyPI).
deps-lock: setup
	$(BIN)/python -m sentinel_infra.packaging lock
