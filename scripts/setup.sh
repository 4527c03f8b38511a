#!/usr/bin/env bash
# Installs what kraftlab needs on a fresh Debian machine (run as root): the system packages the
# node and the nemeses use, and a virtualenv at .venv with the project and its test extras.
# Idempotent and quick on a second run: each step is skipped when its stamp is current.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV="$ROOT/.venv"
PY=${PYTHON:-python3}
EXTRAS=${KRAFTLAB_EXTRAS:-test}

# fuse3 libfuse3-dev pkg-config gcc: the disk-fault filesystem (pyfuse3 builds against libfuse3)
APT_PACKAGES=(iproute2 iptables procps psmisc openssh-server openssh-client rsync sudo
              debootstrap tshark ruby fuse3 libfuse3-dev pkg-config gcc)
# KRAFTLAB_APT_EXTRA: more packages for one mode (the nightly suite's report test drives chromium)
read -r -a apt_extra <<< "${KRAFTLAB_APT_EXTRA:-}"
APT_PACKAGES+=("${apt_extra[@]}")

need_apt=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$p")
done
if ((${#need_apt[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing system packages: ${need_apt[*]}; run as root or: apt-get install ${need_apt[*]}" >&2
    exit 1
  fi
  echo "setup: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections || true
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

stamp="$VENV/.kraftlab-stamp"
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)-$EXTRAS"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: virtualenv $VENV [$EXTRAS]"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q -e ".[$EXTRAS]"
  echo "$want" > "$stamp"
fi
echo "setup: ready ($("$VENV/bin/python" --version), $VENV)"
