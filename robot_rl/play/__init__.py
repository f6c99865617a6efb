"""Videos of policies, playable in any browser."""
