"""Policy networks beyond rsl_rl's defaults."""
