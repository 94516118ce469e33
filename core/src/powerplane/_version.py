"""The version of the ``powerplane`` distribution: here, so a module of core can name it
without importing the package root (which sits above every layer)."""

__version__ = "0.1.0"
