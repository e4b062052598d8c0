"""Which store a command addresses, from its options: the embedded store in a data directory unless told
otherwise, so a forgotten option never writes to a production table. DynamoDB takes `--dynamodb-endpoint`;
a deployed stack takes `--aws-stage` and `--aws-region` together, named explicitly."""

import argparse
from pathlib import Path

from sentinel_service.compose import Services

from .data_dir import DataDir, default_data_dir, open_data_dir


def add_store_options(parser: argparse.ArgumentParser, *, serve: bool = False) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--data",
        metavar="DIR",
        help=f"the embedded store's directory (default: {default_data_dir()}, or SENTINEL_DATA_DIR)",
    )
    where.add_argument(
        "--dynamodb-endpoint", metavar="URL", help="DynamoDB at this endpoint instead (moto, DynamoDB Local)"
    )
    if serve:
        where.add_argument(
            "--store",
            choices=["memory"],
            help="memory: a throwaway store in a temporary directory, deleted when the server stops",
        )
    else:
        where.add_argument(
            "--aws-stage",
            metavar="STAGE",
            help="the deployed stack of this stage (Sentinel-STAGE), with your own AWS credentials; "
            "needs --aws-region",
        )
        parser.add_argument("--aws-region", metavar="REGION", help="the deployed stack's region")


def data_dir_of(args: argparse.Namespace) -> DataDir:
    return open_data_dir(Path(args.data) if args.data else default_data_dir())


def services_for(args: argparse.Namespace) -> Services:
    """The services over the store the options name (see the module's docstring)."""
    from .runtime import connect, open_embedded, open_stack

    if getattr(args, "aws_stage", None):
        if not args.aws_region:
            raise argparse.ArgumentTypeError("--aws-stage needs --aws-region: name the stack's region too")
        return open_stack(args.aws_stage, args.aws_region)
    if args.dynamodb_endpoint:
        return connect(args.dynamodb_endpoint)
    return open_embedded(data_dir_of(args))
