"""One build and one synthesis for the whole run, shared by the test workers.

The first synth in a process costs about ten seconds (jsii loads aws-cdk-lib, cdk-nag checks every
resource), so the first worker to need a template builds the packages and synthesizes both apps under a file
lock in the run's shared temporary folder; the others wait for it and read the same files.
"""

import json
from pathlib import Path

import pytest

from sentinel_infra.packaging import exclusive
from sentinel_service.names import stack_name
from support.infra import CONTEXT, STACK, Synthesized, WithheldAcknowledgements, nag_findings


@pytest.fixture(scope="session")
def synthesized_dirs(built: Path, shared_dir: Path) -> tuple[Path, Path]:
    """Synthesize twice in one process (the second synth of a process costs about a second, the first ten):
    the test context with acknowledgements recorded instead of applied, and cdk.json's defaults as they
    are."""
    branches, defaults = shared_dir / "cdk.out", shared_dir / "cdk.out.defaults"
    done = shared_dir / "synth.json"  # written last: a synth that broke off is redone, not reused
    with exclusive(shared_dir / ".synth.lock"):
        if not done.exists():
            import aws_cdk as cdk

            from app import build_app

            recorded: list[tuple[str, str, str]] = []
            # Recorded, not applied, so this synth shows every finding cdk-nag raises and every
            # acknowledgement the code makes (test_checks compares the two). The template is the same either
            # way: an acknowledgement is only metadata.
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(
                    cdk.Validations, "of", WithheldAcknowledgements(cdk.Validations.of, recorded).of
                )
                app, _ = build_app(CONTEXT, outdir=str(branches), build_dir=built)
                with pytest.raises(RuntimeError, match="ValidationFailed"):
                    app.synth()
            # What `make synth` builds on a fresh clone, acknowledgements applied: any finding fails it.
            app, _ = build_app({}, outdir=str(defaults), build_dir=built)
            try:
                app.synth()
                failure = ""
            except RuntimeError as error:
                failure = str(error)
            done.write_text(json.dumps({"acknowledgements": recorded, "defaults_failure": failure}))
    return branches, defaults


def _synthesized(outdir: Path, stack: str, built: Path, shared_dir: Path) -> Synthesized:
    run = json.loads((shared_dir / "synth.json").read_text())
    return Synthesized(
        outdir=outdir,
        build_dir=built,
        template=json.loads((outdir / f"{stack}.template.json").read_text()),
        nag_findings=nag_findings(outdir),
        acknowledgements=[tuple(a) for a in run["acknowledgements"]],
        failure=run["defaults_failure"] if outdir.name.endswith("defaults") else "",
    )


@pytest.fixture(scope="session")
def synthesized(synthesized_dirs: tuple[Path, Path], built: Path, shared_dir: Path) -> Synthesized:
    """The test context (every optional branch taken), with cdk-nag's findings as if nothing were
    acknowledged."""
    return _synthesized(synthesized_dirs[0], STACK, built, shared_dir)


@pytest.fixture(scope="session")
def synthesized_defaults(synthesized_dirs: tuple[Path, Path], built: Path, shared_dir: Path) -> Synthesized:
    """cdk.json's defaults, synthesized with the acknowledgements applied."""
    from sentinel_infra.config import DeploymentConfig

    return _synthesized(synthesized_dirs[1], stack_name(DeploymentConfig().stage), built, shared_dir)
