"""Sim evaluation dashboard (``robot-rl dashboard``)."""
