"""The version of the ``powerplane-conformance`` distribution: here, so a module of the
suite can name it without importing the package root (which sits above every layer)."""

__version__ = "0.1.0"
