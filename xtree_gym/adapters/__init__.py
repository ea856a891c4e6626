"""Thin adapters that put our envs, harnesses and X-Tree rewards inside other trainers (lazy imports)."""
