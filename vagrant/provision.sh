#!/bin/sh
# Provisions one kraftlab node (a Debian 12 VM, container or chroot); idempotent: running it again
# changes nothing that is already right. Arguments: "ADDRESS=NAME" pairs for /etc/hosts.
#   - packages the node and the nemeses need (python3 + venv, iptables, iproute2 with tc/netem,
#     chrony that can be stopped, rsync, sudo, procps), installed now: nothing at test time;
#   - the sch_netem module loaded now and at boot (where there is a kernel to load it into);
#   - a `kraftlab` user with passwordless sudo, logging in with the provisioning user's keys;
#   - the project from the wheels in /tmp/kraftlab-wheels (if present) in /var/lib/kraftlab/venv;
#   - the lab's names in /etc/hosts.
set -eu

export DEBIAN_FRONTEND=noninteractive
PACKAGES="python3 python3-venv iptables iproute2 chrony rsync sudo procps kmod ca-certificates"
WORKDIR=/var/lib/kraftlab
WHEELS=/tmp/kraftlab-wheels

missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "provision: installing$missing"
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# netem for delay/loss/duplication/reordering faults
if modprobe sch_netem 2>/dev/null; then
  echo sch_netem > /etc/modules-load.d/kraftlab-netem.conf
else
  echo "provision: sch_netem not loadable here (no kernel modules: container or chroot)"
fi

# chrony runs, and the clock nemesis may stop it; never masked
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl enable --now chrony >/dev/null 2>&1 || true
fi

# the suite's user
if ! id kraftlab >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash kraftlab
fi
printf 'kraftlab ALL=(ALL) NOPASSWD:ALL\n' > /etc/sudoers.d/kraftlab.tmp
chmod 0440 /etc/sudoers.d/kraftlab.tmp
visudo -cf /etc/sudoers.d/kraftlab.tmp >/dev/null
mv /etc/sudoers.d/kraftlab.tmp /etc/sudoers.d/kraftlab
home=$(getent passwd kraftlab | cut -d: -f6)
install -d -m 700 -o kraftlab -g kraftlab "$home/.ssh"
for keys in /home/vagrant/.ssh/authorized_keys /root/.ssh/authorized_keys; do
  if [ -f "$keys" ]; then
    touch "$home/.ssh/authorized_keys"
    while IFS= read -r line; do
      [ -n "$line" ] || continue
      grep -qxF "$line" "$home/.ssh/authorized_keys" || printf '%s\n' "$line" >> "$home/.ssh/authorized_keys"
    done < "$keys"
  fi
done
[ -f "$home/.ssh/authorized_keys" ] && chown kraftlab:kraftlab "$home/.ssh/authorized_keys" \
  && chmod 600 "$home/.ssh/authorized_keys"

# the project, offline from the host's wheels
install -d -m 755 "$WORKDIR"
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  [ -x "$WORKDIR/venv/bin/python" ] || python3 -m venv "$WORKDIR/venv"
  sum=$(cat "$WHEELS"/*.whl | sha256sum | cut -c1-16)
  if [ "$(cat "$WORKDIR/venv/.wheels" 2>/dev/null)" != "$sum" ]; then
    "$WORKDIR/venv/bin/pip" install -q --no-index --no-deps --force-reinstall "$WHEELS"/*.whl
    echo "$sum" > "$WORKDIR/venv/.wheels"
  fi
fi

# the lab's names
if [ $# -gt 0 ]; then
  tmp=$(mktemp)
  sed '/# kraftlab-begin/,/# kraftlab-end/d' /etc/hosts > "$tmp"
  {
    echo "# kraftlab-begin"
    for pair in "$@"; do printf '%s\t%s\n' "${pair%%=*}" "${pair#*=}"; done
    echo "# kraftlab-end"
  } >> "$tmp"
  cat "$tmp" > /etc/hosts
  rm -f "$tmp"
fi
echo "provision: ok"
