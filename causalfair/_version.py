"""The package version (read by the face, the CLI and the provenance of every audit)."""

__version__ = "0.1.0"
