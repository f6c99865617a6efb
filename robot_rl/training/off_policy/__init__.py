"""Off-policy learners for the batched env (FastTD3 / FastSAC style): algo=td3 and algo=sac.

config.py: the algo section as a dataclass (unknown keys and bad values are ValueErrors naming the key);
replay.py: a preallocated (steps, worlds) ring on the learner's device with n-step returns drawn at sample
time; networks.py: actor (normalizer + MLP, what the bundle exports) and LayerNorm twin critics;
agents.py: the TD3 and SAC updates; trainer.py: OffPolicyTrainer, the loop, checkpoints and logging.
"""
