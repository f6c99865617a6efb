"""Export trained policies as bundles (policy.onnx + policy.yaml) for robot_rl.deploy."""
