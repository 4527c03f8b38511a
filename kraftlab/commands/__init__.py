"""One module per `kraftlab` subcommand; each defines `register(subparsers)`."""
