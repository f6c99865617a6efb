"""Simulated robot sensors (batched over worlds)."""
