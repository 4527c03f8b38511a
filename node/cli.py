"""`kraft-node`: the node's command line (Kafka's storage tool, the node itself, and quorum/cluster queries).

    kraft-node random-uuid
    kraft-node format --config F --cluster-id ID [--ignore-formatted] [--add-scram 'SCRAM-SHA-256=[name=U,password=P]']
                      [--standalone | --initial-controllers ID@HOST:PORT:DIRID,... | --no-initial-controllers]
    kraft-node info --config F
    kraft-node start --config F
    kraft-node dump-log PATH...
    kraft-node shell --directory DIR | --snapshot FILE | --bootstrap-controller H:P[,H:P...] [COMMAND...]
    kraft-node describe-quorum (--bootstrap-controller H:P | --bootstrap-server H:P) [--replication]
    kraft-node add-controller --bootstrap-controller H:P[,H:P...] --command-config F [--timeout S]
    kraft-node remove-controller --bootstrap-controller H:P[,H:P...] --controller-id N --controller-directory-id DIRID
    kraft-node describe-cluster --bootstrap-server H:P
    kraft-node cluster-id --bootstrap-server H:P
    kraft-node unregister --bootstrap-server H:P --id N

Exit codes: 0 success, 1 the command failed (with one clear line on stderr), 2 bad arguments.
Queries print JSON on stdout.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import shlex
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraftlab.node.admin import (
    METADATA_TOPIC,
    UNREGISTER_BROKER_KEY,
    AdminError,
    cluster_json,
    describe_cluster,
    describe_quorum,
    error_name,
    query,
    quorum_json,
    unregister_request,
)
from kraftlab.node.config import ConfigError, NodeConfig, load_config
from kraftlab.node.storage.errors import StorageError
from kraftlab.node.storage.meta_properties import (
    format_dirs,
    random_cluster_id,
    read_meta_properties,
    validate_cluster_id,
)

if TYPE_CHECKING:
    from kraftlab.node.raft.voters import VoterSet

EXIT_OK = 0
EXIT_FAILED = 1
CommandFailed = AdminError
"""A command could not do its job; the message is printed as is."""
__all__ = ["CommandFailed", "cluster_json", "describe_cluster", "describe_quorum", "main", "quorum_json"]


def _run(coro: Any) -> Any:
    """`asyncio.run`, with asyncio loaded only by the commands that talk to a node (not by `--help`)."""
    import asyncio

    return asyncio.run(coro)


def _config(path: str, overrides: dict[str, str] | None = None) -> NodeConfig:
    try:
        return load_config(path, overrides)
    except ConfigError as e:
        raise CommandFailed(f"{path}: {e}") from None


def cmd_random_uuid(args: argparse.Namespace) -> int:
    print(random_cluster_id())
    return EXIT_OK


def _initial_voters(args: argparse.Namespace, config: NodeConfig) -> tuple[VoterSet | None, uuid.UUID]:
    """Kafka's rules for `--standalone` / `--initial-controllers` / `--no-initial-controllers`: the
    first voters to write in the bootstrap checkpoint (None: write none) and the metadata log
    directory's id."""
    from kraftlab.node.raft.voters import Endpoint
    from kraftlab.node.storage.bootstrap import parse_initial_controllers, standalone_voters
    from kraftlab.node.storage.meta_properties import random_directory_id

    directory_id = random_directory_id()
    dynamic_flag = "--standalone" if args.standalone else "--initial-controllers" if args.initial_controllers else None
    if dynamic_flag is not None and not config.is_controller:
        raise CommandFailed(f"{dynamic_flag} formats a controller, but process.roles has no controller")
    if dynamic_flag is not None and not config.is_dynamic_quorum:
        raise CommandFailed(
            f"controller.quorum.voters is set (a static quorum): {dynamic_flag} is for a dynamic quorum; "
            "remove controller.quorum.voters and set controller.quorum.bootstrap.servers instead"
        )
    if config.is_controller and config.is_dynamic_quorum and dynamic_flag is None and not args.no_initial_controllers:
        raise CommandFailed(
            "controller.quorum.voters is not set on this controller: specify one of --standalone, "
            "--initial-controllers or --no-initial-controllers"
        )
    try:
        if args.standalone:
            endpoints = tuple(
                Endpoint(e.name, e.host, e.port)
                for name in config.controller_listener_names
                if (e := config.advertised(name)) is not None
            )
            return standalone_voters(config.node_id, directory_id, endpoints), directory_id
        if args.initial_controllers:
            voters = parse_initial_controllers(args.initial_controllers, config.controller_listener_names[0])
            mine = voters.voter(config.node_id)
            return voters, mine.directory_id if mine is not None and mine.directory_id else directory_id
    except ValueError as e:
        raise CommandFailed(str(e)) from None
    return None, directory_id


def cmd_format(args: argparse.Namespace) -> int:
    from kraftlab.node.security.bootstrap import parse_add_scram, write_bootstrap
    from kraftlab.node.storage.bootstrap import write_bootstrap_checkpoint

    config = _config(args.config)
    voters, directory_id = _initial_voters(args, config)
    try:
        validate_cluster_id(args.cluster_id)
        scram = [parse_add_scram(text) for text in args.add_scram]
        written = format_dirs(
            config.all_log_dirs,
            args.cluster_id,
            config.node_id,
            args.ignore_formatted,
            directory_ids={config.metadata_log_dir: directory_id},
        )
        if scram and config.metadata_log_dir in written:
            write_bootstrap(config.metadata_log_dir, list(scram), int(time.time() * 1000))
        checkpoint = None
        if voters is not None and config.metadata_log_dir in written:
            checkpoint = write_bootstrap_checkpoint(config.metadata_log_dir, voters, int(time.time() * 1000))
    except (ValueError, StorageError, OSError) as e:
        raise CommandFailed(str(e)) from None
    for d in config.all_log_dirs:
        state = "Formatting" if d in written else "Skipping already formatted"
        print(f"{state} {d} with cluster.id {args.cluster_id} and node.id {config.node_id}")
    if checkpoint is not None and voters is not None:
        print(f"Wrote the bootstrap checkpoint {checkpoint} with kraft.version 1 and voters {list(voters.ids)}")
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    """Like `kafka-storage info`: each directory's meta.properties, and every problem found."""
    config = _config(args.config)
    problems: list[str] = []
    found: dict[str, Any] = {}
    for d in config.all_log_dirs:
        try:
            props = read_meta_properties(d)
        except (StorageError, OSError) as e:
            problems.append(str(e))
            continue
        found[str(d)] = props
        print(f"{d}: version={props.version} cluster.id={props.cluster_id} node.id={props.node_id}")
        if props.node_id != config.node_id:
            problems.append(f"{d}: node.id {props.node_id} does not match the configuration's {config.node_id}")
    if len({p.cluster_id for p in found.values()}) > 1:
        problems.append("log directories belong to different clusters")
    if problems:
        print(f"Found problem{'s' if len(problems) > 1 else ''}:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def cmd_dump_log(args: argparse.Namespace) -> int:
    """Kafka's DumpLogSegments for metadata segments and snapshots, payloads as KIP-631 JSON.
    A directory means every segment and snapshot in it; damage ends that file's dump and fails."""
    from kraftlab.node.metadata.records import dump_payload
    from kraftlab.node.storage.dump import dump_lines, dumpable_files

    damaged = False
    for path in args.paths:
        files = dumpable_files(path)
        if not files or not all(f.exists() for f in files):
            raise CommandFailed(f"{path}: no such segment, snapshot or log directory")
        for f in files:
            for line in dump_lines(f, decode=dump_payload, records=not args.batches_only):
                damaged = damaged or line.startswith("CORRUPT:")
                print(line)
    return EXIT_FAILED if damaged else EXIT_OK


# ---------------------------------------------------------------------------------------------
# The metadata shell (node.metadata.shell): the image from files on disk or from a live quorum


def load_image(path: str) -> tuple[Any, int]:
    """The metadata image of a snapshot file, or of a log directory (its latest snapshot, then
    every record after it on disk, committed or not). Read-only. Returns (image, end offset)."""
    from kraftlab.node.metadata.image import MetadataImage
    from kraftlab.node.metadata.records import decode
    from kraftlab.node.storage.dump import dumpable_files, file_kind, iter_file_batches
    from kraftlab.node.storage.layout import parse_snapshot_name

    files = [f for f in dumpable_files(path) if f.exists() and not f.name.endswith(".part")]
    if not files:
        raise CommandFailed(f"{path}: no metadata segment or snapshot found")
    snapshots = {
        f: snapshot_id
        for f in files
        if file_kind(f) == "snapshot" and (snapshot_id := parse_snapshot_name(f.name)) is not None
    }
    latest = max(snapshots, key=snapshots.__getitem__, default=None)
    image = MetadataImage()
    start = 0
    sources = [latest] if latest is not None else []
    if Path(path).is_dir() or latest is None:
        sources += [f for f in files if file_kind(f) == "segment"]
    if latest is not None:
        start = snapshots[latest].offset
    end = start
    try:
        for f in sources:
            is_snapshot = f == latest
            for fb in iter_file_batches(f):
                if fb.batch.control:
                    continue
                for i, record in enumerate(fb.batch.records):
                    if record.value is not None and (is_snapshot or fb.batch.base_offset + i >= start):
                        image.apply(decode(record.value))
                if not is_snapshot:
                    end = max(end, fb.batch.next_offset)
    except Exception as e:
        raise CommandFailed(f"{path}: cannot load the image: {e}") from None
    return image, end


def _shell_image(args: argparse.Namespace) -> tuple[Any, str]:
    """The image the shell browses and a line saying where it comes from."""
    if args.bootstrap_controller:
        from kraftlab.node.metadata.live import LiveFetchError, fetch_image

        try:
            image, end = _run(fetch_image(args.bootstrap_controller, args.timeout))
        except LiveFetchError as e:
            raise CommandFailed(str(e)) from None
        return image, f"committed metadata image of the quorum up to offset {end}"
    image, end = load_image(args.directory or args.snapshot)
    return image, f"metadata image up to offset {end} (records on disk, committed or not)"


def cmd_shell(args: argparse.Namespace) -> int:
    from kraftlab.node.metadata.shell import MetadataShell, image_tree

    image, origin = _shell_image(args)
    shell = MetadataShell(image_tree(image))
    if args.command_words:
        out = shell.run(shlex.join(args.command_words))
        if out.startswith("error:"):
            raise CommandFailed(out.removeprefix("error:").strip())
        if out:
            print(out)
        return EXIT_OK
    print(f"{origin}; type help", file=sys.stderr)
    for line in sys.stdin:
        if line.strip() in ("exit", "quit"):
            break
        out = shell.run(line)
        if out:
            print(out, file=sys.stderr if out.startswith("error:") else sys.stdout, flush=True)
    return EXIT_OK


def cmd_start(args: argparse.Namespace) -> int:
    from kraftlab.node.server import run_node  # imported here: the storage tool commands need none of it

    overrides = {}
    if args.unsafe_bug:  # test-only: the config refuses them without test mode
        overrides["kraftlab.unsafe.bug"] = ",".join(args.unsafe_bug)
    if args.unsafe_test_mode:
        overrides["kraftlab.unsafe.test.mode"] = "true"
    return run_node(_config(args.config, overrides))


# ---------------------------------------------------------------------------------------------
# Queries over the Kafka protocol


def host_ports(text: str) -> list[tuple[str, int]]:
    """A comma-separated list of HOST:PORT."""
    return [host_port(part) for part in text.split(",") if part.strip()]


def host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


async def append_test_records(client: Any, values: list[bytes], timeout_ms: int = 5000) -> tuple[str, int]:
    """The test-only append path (a node with kraftlab.unsafe.test.mode=true, see node.server): Produce
    one record per tag in `values` to `__cluster_metadata` partition 0, as one batch. Each record
    carries its tag as the key and a null value (metadata replay skips records without a value).
    Returns (Kafka error name, base offset)."""
    from kio.schema.produce.v9 import request as produce
    from kio.schema.types import TopicName
    from kio.static.primitive import Records, i16, i32, i32Timedelta

    from kraftlab.node.raft.ports import Batch, Record
    from kraftlab.node.storage.batches import encode_batch

    data = encode_batch(Batch(0, 0, tuple(Record(v, None) for v in values)))
    partition = produce.PartitionProduceData(index=i32(0), records=Records(data))
    request = produce.ProduceRequest(
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
        topic_data=(produce.TopicProduceData(name=TopicName(METADATA_TOPIC), partition_data=(partition,)),),
    )
    response = await client.send(request)
    part = response.responses[0].partition_responses[0]
    return error_name(part.error_code), int(part.base_offset)


def cmd_describe_quorum(args: argparse.Namespace) -> int:
    address = args.bootstrap_controller or args.bootstrap_server
    described = _run(describe_quorum(address, args.timeout))
    if args.replication:
        from kraftlab.node.admin import replication_table

        print(replication_table(described))
    else:
        print(json.dumps(described))
    return EXIT_OK


def cmd_add_controller(args: argparse.Namespace) -> int:
    """KIP-853: make the controller `--command-config` describes a voter (it must be running and caught up)."""
    from kraftlab.node.raft import messages as m
    from kraftlab.node.voter_admin import change_voters, describe_change, local_controller

    voter, cluster_id = local_controller(args.command_config)
    request = m.AddRaftVoterRequest(voter, int(args.timeout * 1000))
    response = _run(change_voters(args.bootstrap_controller, request, cluster_id, args.timeout + 30.0))
    print(describe_change("add", voter.node_id, response))
    return EXIT_OK


def cmd_remove_controller(args: argparse.Namespace) -> int:
    """KIP-853: remove voter (`--controller-id`, `--controller-directory-id`)."""
    from kraftlab.node.kafka_uuid import parse_kafka_uuid
    from kraftlab.node.raft import messages as m
    from kraftlab.node.voter_admin import change_voters, describe_change

    try:
        directory = parse_kafka_uuid(args.controller_directory_id, "--controller-directory-id")
    except ValueError as e:
        raise CommandFailed(str(e)) from None
    request = m.RemoveRaftVoterRequest(args.controller_id, directory)
    response = _run(change_voters(args.bootstrap_controller, request, None, args.timeout + 30.0))
    print(describe_change("remove", args.controller_id, response))
    return EXIT_OK


def cmd_cluster_id(args: argparse.Namespace) -> int:
    print(_run(describe_cluster(args.bootstrap_server, args.timeout))["cluster_id"])
    return EXIT_OK


def cmd_unregister(args: argparse.Namespace) -> int:
    """KIP-631's `kafka-cluster unregister`: UnregisterBroker through a broker (relayed to the controller)."""
    response = _run(
        query(args.bootstrap_server, UNREGISTER_BROKER_KEY, (0, 0), unregister_request(args.id), args.timeout)
    )
    if int(response.error_code) != 0:
        raise CommandFailed(
            f"UnregisterBroker {args.id} failed: {error_name(response.error_code)} {response.error_message or ''}"
        )
    print(f"Broker {args.id} is no longer registered.")
    return EXIT_OK


def cmd_describe_cluster(args: argparse.Namespace) -> int:
    print(json.dumps(_run(describe_cluster(args.bootstrap_server, args.timeout))))
    return EXIT_OK


# ---------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kraft-node", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser("random-uuid", help="print a new random cluster id").set_defaults(func=cmd_random_uuid)
    p = sub.add_parser("format", help="write meta.properties in every log directory")
    p.add_argument("--config", "-c", required=True)
    p.add_argument("--cluster-id", "-t", required=True)
    p.add_argument("--ignore-formatted", "-g", action="store_true", help="skip directories already formatted")
    p.add_argument("--add-scram", "-S", action="append", default=[], metavar="'MECHANISM=[name=U,password=P]'",
                   help="a SCRAM credential the first active controller writes (KIP-900); repeatable")
    quorum = p.add_mutually_exclusive_group()
    quorum.add_argument(
        "--standalone",
        "-s",
        action="store_true",
        help="a dynamic quorum's first controller: this node is its only voter",
    )
    quorum.add_argument(
        "--initial-controllers",
        "-I",
        metavar="ID@HOST:PORT:DIRID,...",
        help="a dynamic quorum's first voters (directory ids from `kraft-node random-uuid`)",
    )
    quorum.add_argument(
        "--no-initial-controllers",
        "-N",
        action="store_true",
        help="a controller that joins an existing dynamic quorum (as an observer, until added)",
    )
    p.set_defaults(func=cmd_format)
    p = sub.add_parser("info", help="show the log directories' meta.properties and problems")
    p.add_argument("--config", "-c", required=True)
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("start", help="run the node in the foreground (SIGTERM: graceful stop)")
    p.add_argument("--config", "-c", required=True)
    p.add_argument(
        "--unsafe-bug",
        action="append",
        default=[],
        metavar="NAME",
        help="TEST ONLY: switch on a bug-zoo bug (docs/zoo.md); refused without --unsafe-test-mode",
    )
    p.add_argument(
        "--unsafe-test-mode",
        action="store_true",
        help="TEST ONLY: allow the kraftlab.unsafe.* switches (never in production)",
    )
    p.set_defaults(func=cmd_start)
    p = sub.add_parser("dump-log", help="decode metadata log segments and snapshots (KIP-631 JSON payloads)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="a segment, a snapshot, or a (metadata) log directory")
    p.add_argument("--batches-only", action="store_true", help="one line per batch, no records")
    p.set_defaults(func=cmd_dump_log)
    p = sub.add_parser("shell", help="browse the metadata image of a log directory, a snapshot or a live quorum")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--directory", help="a metadata log directory (latest snapshot + log after it)")
    source.add_argument("--snapshot", help="one snapshot file")
    source.add_argument(
        "--bootstrap-controller",
        type=host_ports,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="controllers of a live quorum: the committed image, read from the leader",
    )
    p.add_argument("--timeout", type=float, default=30.0, help="seconds (live quorum)")
    p.add_argument("command_words", nargs="*", metavar="COMMAND", help="run one command and exit")
    p.set_defaults(func=cmd_shell)
    p = sub.add_parser("describe-quorum", help="JSON: leader, epoch, high-water mark, voters, observers")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-controller", type=host_port, metavar="HOST:PORT")
    where.add_argument("--bootstrap-server", type=host_port, metavar="HOST:PORT", help="a broker (relays it)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds")
    p.add_argument("--replication", action="store_true", help="a table of every replica's progress (Kafka's)")
    p.set_defaults(func=cmd_describe_quorum)
    p = sub.add_parser("add-controller", help="add the controller of --command-config as a voter (KIP-853)")
    p.add_argument("--bootstrap-controller", required=True, type=host_ports, metavar="HOST:PORT[,HOST:PORT...]")
    p.add_argument("--command-config", required=True, metavar="F", help="the new controller's server.properties")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds the leader may wait for it to catch up")
    p.set_defaults(func=cmd_add_controller)
    p = sub.add_parser("remove-controller", help="remove a voter (KIP-853)")
    p.add_argument("--bootstrap-controller", required=True, type=host_ports, metavar="HOST:PORT[,HOST:PORT...]")
    p.add_argument("--controller-id", required=True, type=int)
    p.add_argument("--controller-directory-id", required=True, metavar="DIRID")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds")
    p.set_defaults(func=cmd_remove_controller)
    p = sub.add_parser("describe-cluster", help="JSON: cluster id, active controller, brokers")
    p.add_argument("--bootstrap-server", required=True, type=host_port, metavar="HOST:PORT")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds")
    p.set_defaults(func=cmd_describe_cluster)
    p = sub.add_parser("cluster-id", help="print the cluster id a broker reports")
    p.add_argument("--bootstrap-server", required=True, type=host_port, metavar="HOST:PORT")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds")
    p.set_defaults(func=cmd_cluster_id)
    p = sub.add_parser("unregister", help="unregister a broker id from the cluster")
    p.add_argument("--bootstrap-server", required=True, type=host_port, metavar="HOST:PORT")
    p.add_argument("--id", required=True, type=int, help="the broker id")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds")
    p.set_defaults(func=cmd_unregister)
    return parser


def load_kio_without_hypothesis() -> bool:
    """Load kio's static types as if hypothesis were not installed; True when it did.

    kio registers a hypothesis strategy for each of its types when `import hypothesis.strategies`
    succeeds (kio.static._phantom), which costs a `kraft-node` process about a third of its
    start-up; the node never uses them. Only when kio is not loaded yet (a fresh process): hypothesis
    is reported absent (the documented `sys.modules[name] = None` way) while kio loads, then made
    importable again. A process that already loaded kio (a test run) is left untouched."""
    if "kio" in sys.modules or "hypothesis" in sys.modules:
        return False
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # None marks a module absent (documented)
    try:
        importlib.import_module("kio.static.primitive")
    finally:
        del sys.modules["hypothesis"]
    return True


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # `--help` ends here, before kio is loaded
    if argv is None:  # the `kraft-node` program itself (tests pass argv and keep kio's strategies)
        load_kio_without_hypothesis()
    try:
        return int(args.func(args))
    except CommandFailed as e:
        print(f"kraft-node {args.command}: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
