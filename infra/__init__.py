"""The AWS deployment (CDK): `infra.stack` composes one construct per concern from `infra.constructs`.

Importing this package imports no CDK module: `infra.packaging` and `infra.runtime` run without it."""
