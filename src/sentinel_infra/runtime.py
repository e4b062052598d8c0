"""The Lambda runtime, named once: the functions run on it and the deps layer is built for it.

Plain constants, no CDK import, so packaging (which builds wheels for this runtime) stays fast.
`sentinel_infra.constructs.service_function` turns them into CDK objects. Move the Python version and the pip
platform together: a layer built for another interpreter fails at import time, not at deploy time.
"""

PYTHON_VERSION = "3.13"
LAMBDA_RUNTIME = "python" + PYTHON_VERSION
LAMBDA_ARCHITECTURE = "arm64"  # Graviton: about 20% cheaper per GB-second than x86_64
# pip's names for the same target: manylinux2014 (glibc 2.17) wheels load on Amazon Linux 2023.
PIP_PLATFORM = "manylinux2014_aarch64"
PIP_IMPLEMENTATION = "cp"
# The one CPython that compiles the packages' bytecode. A .pyc is valid for every 3.13.x (one magic number),
# but marshal's output may differ between patch releases, and with it every package digest: one exact version
# keeps the digests a function of the sources alone. pyenv's 3.13.0 is the one these machines carry.
BYTECODE_PYTHON = "3.13.0"
BYTECODE_CACHE_TAG = "cpython-" + PYTHON_VERSION.replace(".", "")
