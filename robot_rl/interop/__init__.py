"""Policies across the boundary with Isaac Lab and mjlab: LEAPP pipelines and mjlab ONNX exports import into our
bundles (mapped by joint and sensor names onto our robots' conventions), and our policies export as LEAPP.

Nothing here executes a loaded file: pipelines are read as YAML (safe loader), ONNX graphs and safetensors as data;
a LEAPP stage exported as TorchScript (code) is refused.
"""
