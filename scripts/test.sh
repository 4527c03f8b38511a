#!/usr/bin/env bash
# Runs kraftlab's test suite: installs what it needs, checks ruff, the import boundaries and the types
# (mypy), runs pytest.
#   scripts/test.sh            the default suite (no slow/docker/spark tests)
#   scripts/test.sh --ci       the default suite plus the docker and spark tests; the mode
#                              when CI=true is set in the environment, as CI sets it
#   scripts/test.sh --nightly  everything, including the slow tests
# Extra arguments after these go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=default
[ "${CI:-}" = true ] && mode=ci
case "${1:-}" in --ci|--nightly) mode=${1#--}; shift;; esac
if [ "$mode" = default ]; then KRAFTLAB_EXTRAS=test bash scripts/setup.sh
elif [ "$mode" = ci ]; then KRAFTLAB_EXTRAS=test,spark bash scripts/setup.sh
else KRAFTLAB_EXTRAS=test,spark KRAFTLAB_APT_EXTRA=chromium bash scripts/setup.sh; fi  # a browser for the report's slow test
export PATH="$PWD/.venv/bin:$PATH"
ruff check .
lint-imports --no-cache   # the import boundaries of pyproject.toml [tool.importlinter]
mypy                      # the types, over the files of pyproject.toml [tool.mypy]
case $mode in
  default) marks="not slow and not docker and not spark";;
  ci)      marks="not slow";;
  nightly) marks="";;
esac
set +e
if [ -n "$marks" ]; then pytest -m "$marks" "$@"; else pytest "$@"; fi
rc=$?
set -e
if [ $rc -eq 5 ]; then echo "pytest: no tests were collected for mode=$mode"; rc=0; fi
exit $rc
