# Source before running ROS 2 nodes or tests from this checkout (bash). The ROS wheels find their
# shared libraries themselves (their .pth re-executes Python with LD_LIBRARY_PATH set), so only
# DDS scoping and import paths are set here.
_rrl_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( ($$ % 100) + 1 ))}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
export ROS_LOG_DIR="${ROS_LOG_DIR:-${TMPDIR:-/tmp}/robot_rl_ros_logs}"
export PYTHONPATH="${_rrl_root}/ros_nodes:${_rrl_root}${PYTHONPATH:+:${PYTHONPATH}}"
unset _rrl_root
