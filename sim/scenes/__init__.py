"""Procedurally generated MJCF scenes."""
