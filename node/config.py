"""The node's configuration: `server.properties` (Java properties syntax) → a validated, typed `NodeConfig`.

Parses comments (`#`, `!`), `=`/`:`/whitespace separators, backslash escapes (`\\t`, `\\n`,
`\\uXXXX`, …) and continuation lines exactly as `java.util.Properties.load` does; then applies
Kafka's defaults to the keys listed in docs/contracts.md and validates them, failing with a
`ConfigError` that names the key and says what is wrong. Unknown Kafka keys are kept (Kafka
ignores them too); kraftlab's test-only switches are refused unless
`kraftlab.unsafe.test.mode=true`.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass, field
from pathlib import Path

from kraftlab.node.bugs import NO_BUGS, BugSet, UnknownBug
from kraftlab.node.raft import retention

ROLES = ("broker", "controller")
UNSAFE_TEST_MODE = "kraftlab.unsafe.test.mode"
UNSAFE_KEYS = ("kraftlab.unsafe.bug",)
KRAFTLAB_KEYS = (
    "kraftlab.journal.file",
    "kraftlab.clock.file",
    "kraftlab.metrics.port",
    "kraftlab.broker.self.fence.timeout.ms",
    UNSAFE_TEST_MODE,
    *UNSAFE_KEYS,
)
SUPPORTED_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_LOG_DIRS = "/tmp/kraft-combined-logs"


class ConfigError(ValueError):
    """The configuration is unusable; the message names the key and the problem."""


# ---------------------------------------------------------------------------------------------
# Java properties syntax


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[str]:
    """Join continuation lines (an odd number of trailing backslashes) and drop comments/blanks."""
    out: list[str] = []
    pending: str | None = None
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        if continued:
            line = line[:-1]
        pending = line if pending is None else pending + line
        if not continued:
            out.append(pending)
            pending = None
    if pending is not None:
        out.append(pending)
    return out


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            out.append(c)
            i += 1
            continue
        n = s[i + 1]
        if n == "u":
            digits = s[i + 2 : i + 6]
            if len(digits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ConfigError(f"malformed \\uxxxx escape in {s!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(n, n))
        i += 2
    # \uXXXX escapes of a character outside the BMP arrive as a UTF-16 surrogate pair
    return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    j = i
    if j < len(line) and line[j] in "=:":
        j += 1
    else:
        while j < len(line) and line[j] in " \t\f":
            j += 1
        if j < len(line) and line[j] in "=:":
            j += 1
    rest = line[j:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text into a dict (later keys override earlier ones, as in Java)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key_value(line)
        props[key] = value
    return props


def render_properties(props: dict[str, str]) -> str:
    """Write properties so that `parse_properties` (and Java's Properties.load) reads them back
    identically. Only what the format needs is escaped: separators and comment marks in keys, a
    value's leading space, backslashes, control and non-ASCII characters — so a listener reads
    `PLAINTEXT://10.0.0.1:9092` in the file, as Kafka's own configs are written."""

    def esc(s: str, is_key: bool) -> str:
        out = []
        for i, c in enumerate(s):
            if c == "\\":
                out.append("\\\\")
            elif c in "\t\n\r\f":
                out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
            elif (is_key and c in "=:#! ") or (c == " " and i == 0):
                out.append("\\" + c)
            elif ord(c) < 0x20 or ord(c) > 0x7E:
                units = c.encode("utf-16-be", "surrogatepass")
                out.extend(f"\\u{int.from_bytes(units[k : k + 2], 'big'):04x}" for k in range(0, len(units), 2))
            else:
                out.append(c)
        return "".join(out)

    return "".join(f"{esc(k, True)}={esc(v, False)}\n" for k, v in props.items())


# ---------------------------------------------------------------------------------------------
# Typed configuration


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: `NAME://host:port` (an empty host means every interface)."""

    name: str
    host: str
    port: int

    def connect_host(self) -> str:
        return self.host or "127.0.0.1"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Voter:
    """One entry of `controller.quorum.voters`: `id@host:port`."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Everything the node process reads from `server.properties`, typed, with Kafka's defaults."""

    roles: frozenset[str]
    node_id: int
    voters: tuple[Voter, ...]
    """`controller.quorum.voters` (the static quorum); empty in a dynamic quorum."""
    listeners: tuple[Endpoint, ...]
    advertised_listeners: tuple[Endpoint, ...]
    controller_listener_names: tuple[str, ...]
    inter_broker_listener_name: str
    security_protocol_map: dict[str, str]
    metadata_log_dir: Path
    log_dirs: tuple[Path, ...]
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    append_linger_ms: int = 25
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    metadata_log_segment_bytes: int = 1024 * 1024 * 1024
    metadata_snapshot_max_new_record_bytes: int = 20 * 1024 * 1024
    metadata_max_idle_interval_ms: int = 500
    metadata_max_retention_bytes: int = retention.DEFAULT_MAX_BYTES
    """`metadata.max.retention.bytes`: the log and snapshots kept before the log behind the latest
    snapshot is deleted (-1: no limit)."""
    metadata_max_retention_ms: int = retention.DEFAULT_MAX_MS
    """`metadata.max.retention.ms`: how long log segments behind the latest snapshot are kept (-1: no limit)."""
    journal_file: Path | None = None
    clock_file: Path | None = None
    metrics_port: int | None = None
    """`kraftlab.metrics.port`: None (the key absent) serves no metrics, as Kafka binds nothing
    optional by default; 0 serves them on a free port (its address logged and journalled)."""
    broker_self_fence_timeout_ms: int = 18000
    replica_lag_time_max_ms: int = 30000
    """`replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR."""
    unsafe_test_mode: bool = False
    unsafe_bug: str | None = None
    bugs: BugSet = NO_BUGS
    """The planted bugs `kraftlab.unsafe.bug` names (comma-separated; test mode only)."""
    bootstrap_servers: tuple[tuple[str, int], ...] = ()
    """`controller.quorum.bootstrap.servers` (KIP-853): where a node of a dynamic quorum finds it."""
    raw: dict[str, str] = field(default_factory=dict)

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_dynamic_quorum(self) -> bool:
        """Whether the voter set lives in the log (KIP-853) rather than in `controller.quorum.voters`."""
        return not self.voters

    @property
    def voter_ids(self) -> tuple[int, ...]:
        return tuple(v.node_id for v in self.voters)

    def voter(self, node_id: int) -> Voter | None:
        return next((v for v in self.voters if v.node_id == node_id), None)

    def listener(self, name: str) -> Endpoint | None:
        return next((e for e in self.listeners if e.name == name), None)

    def advertised(self, name: str) -> Endpoint | None:
        return next((e for e in self.advertised_listeners if e.name == name), None) or self.listener(name)

    @property
    def controller_listener(self) -> Endpoint | None:
        """The first controller listener this node binds (None on a broker-only node)."""
        return next((e for e in self.listeners if e.name in self.controller_listener_names), None)

    @property
    def broker_listeners(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.listeners if e.name not in self.controller_listener_names)

    @property
    def all_log_dirs(self) -> tuple[Path, ...]:
        """metadata.log.dir first, then every log.dirs entry not equal to it (each formatted)."""
        dirs = [self.metadata_log_dir, *self.log_dirs]
        return tuple(dict.fromkeys(dirs))


class _Reader:
    """Typed access to the raw properties, each error naming its key."""

    def __init__(self, props: dict[str, str]) -> None:
        self.props = props

    def str(self, key: str, default: str | None = None) -> str | None:
        value = self.props.get(key)
        if value is None or value.strip() == "":
            return default
        return value.strip()

    # The methods are named after the types they read: below them, the builtins are spelled out.
    def int(self, key: builtins.str, default: int, minimum: int | None = 0) -> int:
        value = self.str(key)
        if value is None:
            return default
        try:
            n = int(value)
        except ValueError:
            raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
        if minimum is not None and n < minimum:
            raise ConfigError(f"{key}: must be >= {minimum}, got {n}")
        return n

    def bool(self, key: builtins.str, default: builtins.bool = False) -> builtins.bool:
        value = self.str(key)
        if value is None:
            return default
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"{key}: expected true or false, got {value!r}")

    def list(self, key: builtins.str) -> builtins.list[builtins.str]:
        value = self.str(key)
        if value is None:
            return []
        return [item.strip() for item in value.split(",") if item.strip()]


_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:\[\]]*)):(?P<port>\d+)$")


def _host_port(text: str, key: str) -> tuple[str, int]:
    m = _HOST_PORT.match(text)
    if not m:
        raise ConfigError(f"{key}: {text!r} is not host:port")
    port = int(m.group("port"))
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key}: port {port} out of range in {text!r}")
    return (m.group("v6") if m.group("v6") is not None else m.group("host")), port


BOOTSTRAP_SERVERS = "controller.quorum.bootstrap.servers"


def parse_voters(text: str, key: str = "controller.quorum.voters") -> tuple[Voter, ...]:
    """`1@host:9093,2@host:9094` → voters; duplicate ids and malformed entries are errors."""
    voters: list[Voter] = []
    for item in [s.strip() for s in text.split(",") if s.strip()]:
        node, sep, address = item.partition("@")
        if not sep or not node.strip().isdigit():
            raise ConfigError(f"{key}: {item!r} is not id@host:port")
        host, port = _host_port(address.strip(), key)
        if not host:
            raise ConfigError(f"{key}: {item!r} has no host")
        voters.append(Voter(int(node), host, port))
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{key}: duplicate voter id in {text!r}")
    return tuple(voters)


def parse_listeners(items: list[str], key: str) -> tuple[Endpoint, ...]:
    endpoints: list[Endpoint] = []
    for item in items:
        name, sep, address = item.partition("://")
        if not sep or not re.fullmatch(r"[A-Za-z0-9_]+", name):
            raise ConfigError(f"{key}: {item!r} is not NAME://host:port")
        host, port = _host_port(address, key)
        endpoints.append(Endpoint(name.upper(), host, port))
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"{key}: listener names must be unique, got {names}")
    return tuple(endpoints)


def _security_map(r: _Reader, listener_names: list[str]) -> dict[str, str]:
    items = r.list("listener.security.protocol.map")
    mapping: dict[str, str] = {}
    if not items:
        mapping = {n: n if n in SUPPORTED_SECURITY_PROTOCOLS else "PLAINTEXT" for n in listener_names}
    for item in items:
        name, sep, proto = item.partition(":")
        if not sep or not name or not proto:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
        mapping[name.strip().upper()] = proto.strip().upper()
    for name in listener_names:
        protocol = mapping.get(name)
        if protocol is None:
            raise ConfigError(f"listener.security.protocol.map: no security protocol for listener {name}")
        if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: {name}:{protocol} unsupported "
                f"(one of {', '.join(SUPPORTED_SECURITY_PROTOCOLS)})"
            )
    return mapping


def _check_unsafe(r: _Reader) -> bool:
    test_mode = r.bool(UNSAFE_TEST_MODE)
    for key in r.props:
        if key == "kraftlab.unsafe.lose.unflushed":
            raise ConfigError(f"{key}: removed; a power loss is made by the disk-fault filesystem the data "
                              "directory is mounted on (kraftlab test --diskfs), not by the node")
        if key.startswith("kraftlab.unsafe.") and key not in (UNSAFE_TEST_MODE, *UNSAFE_KEYS):
            raise ConfigError(f"{key}: unknown test-only switch (known: {', '.join(UNSAFE_KEYS)})")
        if key in UNSAFE_KEYS and not test_mode:
            raise ConfigError(
                f"{key} is a test-only switch that breaks the node on purpose; "
                f"it is refused unless {UNSAFE_TEST_MODE}=true"
            )
    return test_mode


def config_from_properties(props: dict[str, str]) -> NodeConfig:
    """Apply defaults and validate; raises `ConfigError` naming the first problem found."""
    r = _Reader(props)
    roles_list = r.list("process.roles")
    if not roles_list:
        raise ConfigError("process.roles: missing (broker, controller or broker,controller)")
    for role in roles_list:
        if role not in ROLES:
            raise ConfigError(f"process.roles: unknown role {role!r} (known: broker, controller)")
    roles = frozenset(roles_list)
    if r.str("node.id") is None:
        raise ConfigError("node.id: missing (required in KRaft mode)")
    node_id = r.int("node.id", 0)

    voters_text = r.str("controller.quorum.voters")
    bootstrap = tuple(_host_port(item, BOOTSTRAP_SERVERS) for item in r.list(BOOTSTRAP_SERVERS))
    if voters_text is None and not bootstrap:
        raise ConfigError(
            f"controller.quorum.voters (id@host:port,...) or {BOOTSTRAP_SERVERS} (host:port,...): one is required"
        )
    voters = parse_voters(voters_text) if voters_text is not None else ()
    if voters_text is not None and not voters:
        raise ConfigError("controller.quorum.voters: empty")
    if voters and "controller" in roles and node_id not in {v.node_id for v in voters}:
        raise ConfigError(
            f"controller.quorum.voters: this node ({node_id}) has the controller role "
            f"but is not one of the voters {[v.node_id for v in voters]}"
        )

    controller_names = tuple(n.upper() for n in r.list("controller.listener.names"))
    if not controller_names:
        raise ConfigError("controller.listener.names: missing (for example CONTROLLER)")
    listeners = parse_listeners(r.list("listeners"), "listeners")
    advertised = parse_listeners(r.list("advertised.listeners"), "advertised.listeners")
    names = [e.name for e in listeners]
    if "controller" in roles and not any(n in controller_names for n in names):
        raise ConfigError(
            f"listeners: a controller needs a listener named in controller.listener.names "
            f"({', '.join(controller_names)}); got {names}"
        )
    if "controller" not in roles and any(n in controller_names for n in names):
        raise ConfigError(f"listeners: a broker-only node must not bind the controller listener; got {names}")
    inter_broker = (r.str("inter.broker.listener.name", "PLAINTEXT") or "PLAINTEXT").upper()
    if "broker" in roles:
        if not any(n not in controller_names for n in names):
            raise ConfigError(f"listeners: a broker needs a listener besides the controller's; got {names}")
        if inter_broker not in names:
            raise ConfigError(f"inter.broker.listener.name: {inter_broker} is not one of listeners {names}")
    security = _security_map(r, names + [e.name for e in advertised])

    log_dirs_items = r.list("log.dirs") or r.list("log.dir") or [DEFAULT_LOG_DIRS]
    log_dirs = tuple(Path(d) for d in log_dirs_items)
    metadata_dir = Path(r.str("metadata.log.dir") or str(log_dirs[0]))

    test_mode = _check_unsafe(r)
    session_ms = r.int("broker.session.timeout.ms", 9000, 1)
    self_fence_ms = r.int("kraftlab.broker.self.fence.timeout.ms", 2 * session_ms, 1)
    if self_fence_ms <= session_ms:
        raise ConfigError(
            f"kraftlab.broker.self.fence.timeout.ms ({self_fence_ms}) must be longer than "
            f"broker.session.timeout.ms ({session_ms})"
        )
    bug_names = r.str("kraftlab.unsafe.bug")
    try:
        bugs = BugSet.of(bug_names)
    except UnknownBug as e:
        raise ConfigError(f"kraftlab.unsafe.bug: {e}") from None
    journal = r.str("kraftlab.journal.file")
    clock = r.str("kraftlab.clock.file")
    metrics_port: int | None = None
    if r.str("kraftlab.metrics.port") is not None:
        metrics_port = r.int("kraftlab.metrics.port", 0)
        if metrics_port > 65535:
            raise ConfigError(f"kraftlab.metrics.port: {metrics_port} out of range")
    return NodeConfig(
        roles=roles,
        node_id=node_id,
        voters=voters,
        listeners=listeners,
        advertised_listeners=advertised,
        controller_listener_names=controller_names,
        inter_broker_listener_name=inter_broker,
        security_protocol_map=security,
        metadata_log_dir=metadata_dir,
        log_dirs=log_dirs,
        election_timeout_ms=r.int("controller.quorum.election.timeout.ms", 1000, 1),
        fetch_timeout_ms=r.int("controller.quorum.fetch.timeout.ms", 2000, 1),
        election_backoff_max_ms=r.int("controller.quorum.election.backoff.max.ms", 1000, 1),
        request_timeout_ms=r.int("controller.quorum.request.timeout.ms", 2000, 1),
        retry_backoff_ms=r.int("controller.quorum.retry.backoff.ms", 20),
        append_linger_ms=r.int("controller.quorum.append.linger.ms", 25),
        broker_session_timeout_ms=session_ms,
        broker_heartbeat_interval_ms=r.int("broker.heartbeat.interval.ms", 2000, 1),
        metadata_log_segment_bytes=r.int("metadata.log.segment.bytes", 1024 * 1024 * 1024, 1),
        metadata_snapshot_max_new_record_bytes=r.int("metadata.snapshot.max.new.record.bytes", 20 * 1024 * 1024, 1),
        metadata_max_idle_interval_ms=r.int("metadata.max.idle.interval.ms", 500),
        metadata_max_retention_bytes=r.int(retention.MAX_BYTES_KEY, retention.DEFAULT_MAX_BYTES, retention.UNLIMITED),
        metadata_max_retention_ms=r.int(retention.MAX_MS_KEY, retention.DEFAULT_MAX_MS, retention.UNLIMITED),
        journal_file=Path(journal) if journal else metadata_dir / "journal.jsonl",
        clock_file=Path(clock) if clock else None,
        metrics_port=metrics_port,
        broker_self_fence_timeout_ms=self_fence_ms,
        replica_lag_time_max_ms=r.int("replica.lag.time.max.ms", 30000, 1),
        unsafe_test_mode=test_mode,
        unsafe_bug=bug_names,
        bugs=bugs,
        bootstrap_servers=bootstrap,
        raw=dict(props),
    )


def load_config(path: str | Path, overrides: dict[str, str] | None = None) -> NodeConfig:
    """Read and validate a `server.properties` file; `overrides` (from command-line flags) replace
    its keys before validation, so they are checked exactly like the file's."""
    p = Path(path)
    try:
        text = p.read_text(encoding="latin-1")
    except OSError as e:
        raise ConfigError(f"cannot read {p}: {e.strerror or e}") from None
    return config_from_properties({**parse_properties(text), **(overrides or {})})
