"""What the broker's request handlers answer with: `ClientReply` (a response for a request's token;
None: no answer at all, as for Produce with acks=0)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ClientReply:
    token: Any
    response: Any
