"""Who votes: the voter set of the metadata quorum, and the sets in force by log offset.

Every question the Raft core asks about membership — is this node a voter, who are the others,
is this a majority, what offset does a majority hold — goes through a `VoterSet`, so that a
change of membership (KIP-853: VotersRecord in the log) changes one object, not the core.

- `Voter`: one voter, known by its id and (KIP-853) its directory id, so that a replaced disk is
  a new voter; `endpoints` are its controller listeners by name. The static mode
  (`controller.quorum.voters`) knows ids only: directory id None, endpoints empty.
- `VoterSet`: an immutable set of voters with the majority arithmetic.
- `VoterHistory`: the voter set in force at each log offset. A set takes effect at the offset
  of the record that carries it (as soon as it is appended, as KIP-853 has it) and is forgotten
  when that record is truncated away. With a static quorum it holds one set, from offset 0.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass


def majority(n: int) -> int:
    """How many of `n` voters make a majority."""
    return n // 2 + 1


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A controller listener of a voter (KIP-853's Endpoints: listener name, host, port)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    """One voter: its node id, its directory id (None when unknown: the static mode), its endpoints,
    and the range of kraft.version it supports (VotersRecord's KRaftVersionFeature)."""

    node_id: int
    directory_id: uuid.UUID | None = None
    endpoints: tuple[Endpoint, ...] = ()
    kraft_versions: tuple[int, int] = (0, 1)


class VoterSet:
    """An immutable set of voters, keyed by node id (at most one directory id per node id)."""

    __slots__ = ("_by_id", "ids", "majority")

    def __init__(self, voters: Iterable[Voter]) -> None:
        by_id: dict[int, Voter] = {}
        for v in voters:
            if v.node_id in by_id:
                raise ValueError(f"voter {v.node_id} appears twice in a voter set")
            by_id[v.node_id] = v
        self._by_id = dict(sorted(by_id.items()))
        self.ids: tuple[int, ...] = tuple(self._by_id)
        """The voters' node ids, ascending."""
        self.majority: int = majority(len(self.ids))
        """How many voters make a majority of this set."""

    @classmethod
    def of_ids(cls, ids: Iterable[int]) -> VoterSet:
        """The static mode's set (`controller.quorum.voters`): ids only (duplicates collapse)."""
        return cls(Voter(i) for i in sorted(set(ids)))

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._by_id

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VoterSet) and self._by_id == other._by_id

    def __hash__(self) -> int:
        return hash(tuple(self._by_id.values()))

    def __repr__(self) -> str:
        return f"VoterSet({list(self._by_id.values())!r})"

    def voter(self, node_id: int) -> Voter | None:
        return self._by_id.get(node_id)

    def holds(self, node_id: int, directory_id: uuid.UUID | None) -> bool:
        """Whether replica (node_id, directory_id) is a voter of this set. A voter known with a
        directory id is that directory only (a replaced disk is a new replica, not the voter); a
        voter known by id alone (the static mode) is any directory of that node."""
        voter = self._by_id.get(node_id)
        if voter is None:
            return False
        return voter.directory_id is None or voter.directory_id == directory_id

    def with_voter(self, voter: Voter) -> VoterSet:
        """This set plus `voter` (ValueError if its id is already a voter)."""
        return VoterSet([*self._by_id.values(), voter])

    def without(self, node_id: int) -> VoterSet:
        """This set less voter `node_id`."""
        return VoterSet(v for i, v in self._by_id.items() if i != node_id)

    def others(self, node_id: int) -> tuple[int, ...]:
        """Every voter but `node_id`, ascending."""
        return tuple(v for v in self.ids if v != node_id)

    def is_only_voter(self, node_id: int) -> bool:
        return self.ids == (node_id,)

    def is_majority(self, node_ids: Iterable[int]) -> bool:
        """Whether `node_ids` (non-voters ignored) include a majority of this set."""
        by_id = self._by_id
        return sum(1 for n in set(node_ids) if n in by_id) >= self.majority

    def majority_value(self, values: Mapping[int, int]) -> int:
        """The largest value that a majority of voters hold at least (a voter missing from `values`
        counts as -1): with log end offsets, the offset a majority holds; with fetch times, the
        time by which a majority had last been heard from."""
        ordered = [values.get(v, -1) for v in self.ids]
        ordered.sort(reverse=True)
        return ordered[self.majority - 1]

    def overlaps_majority_with(self, other: VoterSet) -> bool:
        """Whether every majority of this set intersects every majority of `other` (the safety
        condition of a membership change: it holds when the sets differ by one voter)."""
        common = sum(1 for v in self.ids if v in other)
        # The fewest common voters a majority of each set must contain, added up, exceed the common voters.
        return (self.majority - (len(self) - common)) + (other.majority - (len(other) - common)) > common


class VoterHistory:
    """The voter sets in force by log offset: the set at offset o is the last one added at an
    offset <= o. `latest` is the set the node acts on now (the set of its log's last entry)."""

    __slots__ = ("_offsets", "_sets")

    def __init__(self, initial: VoterSet) -> None:
        self._offsets: list[int] = [-1]
        self._sets: list[VoterSet] = [initial]

    @property
    def latest(self) -> VoterSet:
        return self._sets[-1]

    @property
    def last_offset(self) -> int:
        """The offset of the record that brought `latest` into force (-1: the initial set)."""
        return self._offsets[-1]

    def at(self, offset: int) -> VoterSet:
        """The voter set in force at `offset`."""
        return self._sets[bisect.bisect_right(self._offsets, offset) - 1]

    def since(self, offset: int) -> list[VoterSet]:
        """The set in force at `offset` and every set added after it, in log order."""
        first = bisect.bisect_right(self._offsets, offset) - 1
        return self._sets[first:]

    def add_at(self, offset: int, voters: VoterSet) -> None:
        """A record at `offset` (after every offset added so far) brings `voters` into force."""
        if offset <= self._offsets[-1]:
            raise ValueError(f"voter set at offset {offset} is not after the last one ({self._offsets[-1]})")
        self._offsets.append(offset)
        self._sets.append(voters)

    def reset(self, voters: VoterSet) -> None:
        """The log was replaced (a snapshot): `voters` is in force from before its first offset on."""
        self._offsets[:] = [-1]
        self._sets[:] = [voters]

    def truncate_from(self, offset: int) -> None:
        """The log lost every record at or after `offset`: sets they brought are no longer in force."""
        while len(self._offsets) > 1 and self._offsets[-1] >= offset:
            self._offsets.pop()
            self._sets.pop()
