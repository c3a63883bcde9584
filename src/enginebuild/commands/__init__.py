"""One module per verb: `add_arguments(parser)` and `run(args, workspace) -> exit code`."""
