# robot_rl: the two commands are `make demo` (set up + main job) and `make test` (set up + tests).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PYTHON ?= python3
APT_PACKAGES := $(shell grep -v '^\#' requirements/apt.txt | tr '\n' ' ')

# DDS stays on this machine; MuJoCo renders offscreen.
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
export MUJOCO_GL := egl
export PYOPENGL_PLATFORM := egl

.PHONY: setup apt venv demo test lint bench clean

setup: apt $(VENV)/.installed

apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  SUDO=$$([ $$(id -u) -eq 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The constraints file pins torch to the CPU build; `pip check` proves the set is consistent.
# ros_nodes/setup.py registers the entry points robot_rl finds the ROS 2 functions by.
$(VENV)/.installed: pyproject.toml requirements/constraints.txt ros_nodes/setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c requirements/constraints.txt -e ".[train,guidance,dashboard,ros,crazyflie,interop,sweep,warp,dev]"
	$(PIP) install -q --no-deps -e ros_nodes
	$(PIP) check
	touch $@

demo: setup
	ROS_DOMAIN_ID=$${ROS_DOMAIN_ID:-42} $(VENV)/bin/robot-rl demo

test: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/pytest -q -rs --durations=25 -n 2 -m "not timing"
	$(VENV)/bin/pytest -q -rs --durations=5 -m timing
	$(PIP) check

bench: setup
	$(PY) bench/env_throughput.py

clean:
	rm -rf $(VENV) runs outputs multirun test-artifacts
