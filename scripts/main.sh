#!/usr/bin/env bash
# The main job: installs what it needs, then runs one kraftlab test against a fresh default
# five-node namespace lab (created and torn down for the run), ending in a verdict, a report
# under store/ and kraftlab's exit code (0 valid, 1 invalid, 2 unknown, 254 bad args, 255 crash).
# Arguments replace the default test arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  args=(--workload mixed --nemesis all --time-limit 60 --seed 7)
fi
exec .venv/bin/kraftlab test "${args[@]}"
