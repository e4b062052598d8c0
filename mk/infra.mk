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
	$(BIN)/cfn-lint -i W3005 -- cdk.out/*.template.json

deploy: build
	$(CDK) deploy --all --no-notices --outputs-file $(STACK_OUTPUTS) $(CDK_FLAGS)
	@# The acceptance verbs belong to another concern's mk file; until one defines them, say so plainly.
	@if grep -qs '^acceptance:' Makefile mk/*.mk; then $(MAKE) acceptance; \
	else echo "deploy: no acceptance target yet, so nothing checked the deployed stack"; fi

# Re-resolve the deps layer's pins after a change to [project].dependencies (needs PyPI).
deps-lock: setup
	$(BIN)/python -m sentinel_infra.packaging lock
