"""CLI subcommands (one module each; see causalfair.cli)."""
