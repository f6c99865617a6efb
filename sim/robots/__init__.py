"""Robot models that live outside MJCF: on-board controllers, motor curves."""
