"""Experiment scripts: each writes results/<name>/ (see docs/experiments.md)."""
