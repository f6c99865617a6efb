"""Evaluation: fixed-seed rollouts, success with confidence intervals, JSON results in the run."""
