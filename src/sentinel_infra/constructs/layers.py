"""The two layers every function carries: the domain core and the third-party runtime dependencies."""

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from sentinel_infra.constructs.service_function import ARCHITECTURE, RUNTIME
from sentinel_infra.packaging import Package, package_path


class Layers(Construct):
    """Both are uploaded exactly as `make build` zipped them, so Lambda's CodeSha256 of each layer version is
    the base64 digest recorded in build/digests.json."""

    def __init__(self, scope: Construct, construct_id: str, *, core: Package, deps: Package) -> None:
        super().__init__(scope, construct_id)
        self.core = self._layer("Core", core, "sentinel domain core (python/sentinel)")
        self.deps = self._layer("Deps", deps, "sentinel runtime dependencies (infra/deps-layer.txt)")

    def _layer(self, construct_id: str, package: Package, what: str) -> lambda_.LayerVersion:
        return lambda_.LayerVersion(
            self,
            construct_id,
            code=lambda_.Code.from_asset(str(package_path(package))),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description=f"{what}, sha256 {package.sha256}",
        )

    @property
    def all(self) -> list[lambda_.ILayerVersion]:
        return [self.deps, self.core]
