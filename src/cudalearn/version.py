"""The package version: the course is installed on Colab from the git tag v<version> (all notebooks)."""

__version__ = "0.1.0"
