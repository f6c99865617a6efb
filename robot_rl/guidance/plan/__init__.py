"""Plan-guided exploration (LLM-TALE, DECKARD): a language model's subgoal plan steers the arm, RL learns a residual.

The plan itself:
- ``schema``: the plan data model (Plan, Subgoal, Affordance) and its vocabulary (skills, points, approaches);
- ``scene``: what a planner is told about one layout (Scene, from the task's identities);
- ``validation``: whether a plan can be right for a scene (names, vocabulary, skill order);
- ``planners``: the oracle and the language-model planner (its prompt), ``make_planner``;
- ``wrong_plans``: deliberately wrong plans and options for the injected-error experiments.

Following it online (``guided_env.PlanGuidedEnv``, configured by ``config.PlanGuidanceConfig``):
- ``subgoals``: each layout's plan as tensors, where each skill's subgoal is and when it is achieved;
- ``option_selector``: the rules that pick an option from measured success or critic values;
- ``option_choice``: which option each world tries at a subgoal start;
- ``verification``: per-subgoal evidence of what works (DECKARD);
- ``replanning``: asking the planner again after repeated failure;
- ``records``: the run's plan.json and the state checkpoints carry.
"""
