"""VLM/LLM guidance: model client, keypoint proposer and reward, planned exploration."""
