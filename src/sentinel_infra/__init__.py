"""The AWS deployment (CDK): `sentinel_infra.stack` composes one construct per concern from
`sentinel_infra.constructs`.

Importing this package imports no CDK module: `sentinel_infra.packaging` and `sentinel_infra.runtime` run
without it."""
