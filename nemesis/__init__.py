"""Faults on hosts, their seeded schedules, and their exact reversal.

Every fault is one history op of process "nemesis" (`Nemesis.invoke(f, value)` records `invoke`,
then `ok` = applied exactly, `fail` = not applied (with the reason; "unsupported here: …" when the
host cannot do it), or `info` = partly applied / effect unknown). Nodes are named by `nodes`
(a list) or `target` (one | minority | majority | all | controller (the active one, asked when the
op fires) | controllers | brokers).

| f | value (what is asked) | completion value (what was done) |
| --- | --- | --- |
| start-partition | `topology` (+ `seed`, `nodes`, `from`, `to`) or `grudge`; `drop`* | `grudge`: receiver → dropped |
| stop-partition | — | `healed`: hosts whose lab chain was flushed |
| kill / graceful-stop | nodes/target | `nodes`, `signal` (SIGKILL / SIGTERM) |
| restart | nodes (default: every killed/stopped one) | `nodes`, `already` (were running) |
| pause / resume | nodes/target (resume default: every paused one) | `nodes`, `signal` |
| clock-bump | nodes/target, `delta_ms` (±10 min) | `offset_ms` per node (bumps add up) |
| clock-rate | nodes/target, `rate` (0.1…10) | `rate`, `anchor_mono_ns` per node |
| clock-strobe | nodes/target, `low_ms`, `high_ms`, `period_ms` | the same; a thread rewrites the file |
| clock-reset | nodes (default: all skewed) | offset 0, rate 1 written |
| clock-step / clock-step-reset | nodes, `delta_s` (VMs only: `date -s` after stopping time sync) | `stopped` services |
| start-packet | `kind`: loss, bandwidth, delay, duplicate, reorder (netem) | nodes, rule or qdisc |
| stop-packet | — | hosts cleared |
| start-disk | nodes, `damage` (disk.DAMAGES), `seed`, `amount` | per node: file, sizes, flipped bits |
| stop-disk | `watch_s` | `formatted`, `restarted`, `rebuilt`, `refused` (voters), `outcomes`* |
| start-slow-disk | nodes/target, `ms`, `glob` (`--diskfs` only) | `nodes`, `ms`, `glob`: every fsync held `ms` |
| stop-slow-disk | — | `nodes` whose delays were cleared |
| start-disk-errors | nodes/target, `ops`, `glob`, `errno` (EIO, ENOSPC), `probability` (`--diskfs` only) | the rule |
| stop-disk-errors | — | `injected`: per node the errors returned (op, path, errno, rmono); `restarted` |
| start-membership | `change`: shrink / grow (`to`), replace; `target`, `seed` | `nodes`, `voters_after`, `changes`* |
| stop-membership | — | `voters`, `desired`, `changes`*: back to the voter set before the first change |
| add-controller / remove-controller | nodes (remove: or target controller) | `nodes`, `voters`, `changes`* |
| replace-disk | nodes (or target controller) | `nodes`, `old_directory_id`, `voters`, `changes`* |

*`outcomes` (stop-disk): per node its damage, zone and what became of it: `served` (started on it),
`formatted` (a wiped broker-only node), `rebuilt` (an observer that refused, re-made), `refused` (a
voter that refused, or a wiped voter, never formatted anew: left down).

*`changes` (membership, dynamic quorums only): one entry per voter change, in order — `change` (add,
remove), `node`, `directory_id`, `outcome` (ok: the quorum shows it in force; fail: refused for good;
info: may still commit), `attempts`, `elapsed_s`, `error`. Each is AddRaftVoter / RemoveRaftVoter sent
as `kraft-node add-controller` / `remove-controller` do, retried while refused for now.

*`drop`: `all` (default) or `new-connections`: only the TCP SYNs from the senders are dropped, so
a receiver cannot be connected to by them but still reaches them over connections it opens.

A kill of a node whose metadata directory is on the disk-fault filesystem (`--diskfs`,
nemesis.diskfs) is a power loss: the filesystem also drops every write the node never fsynced
(nemesis.powerloss), and the kill's result lists what was lost (`lost_unfsynced`).

Modules: grudge/targets (pure choices), netfilter/packet/clockfile/disk (commands), partition/
process/clock/packet/disk/diskrules/membership (fault kinds),
voter_changes (one voter change, retried), core (Nemesis), state + ports.Ledger (faults in force,
persisted), schedule/runner/session (packages, seeded schedules, replay, heal on every exit path),
cleanup (clean_lab for `kraftlab clean`), daemon_control (a NodeControl over plain daemons), fakes,
powerloss (a kill that also loses un-fsynced writes), diskfs (the FUSE filesystem of disk faults).
"""
