"""Training glue: rsl_rl's PPO driven over our batched env, checkpoints, run directories."""
