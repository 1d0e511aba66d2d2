"""Fakes for forwarder tests: faces that record what they are asked to send, a hand-driven
clock, and packet builders that produce real wire encodings."""

from __future__ import annotations

from dataclasses import dataclass, field

from forwarder.fw.forwarder import Forwarder
from forwarder.table.limits import TableLimits
from icn.wire.encode import make_data, make_interest
from icn.wire.lp import LpView
from icn.wire.name import from_uri, reflexive_component
from icn.wire.packet import InterestView, parse_interest

Sent = tuple[str, bytes, bytes | None, int | None]


@dataclass
class FakeFace:
    """Records (kind, wire, pit_token, extra): extra is the CongestionMark of a Data, the reason
    of a Nack, None for an Interest."""

    face_id: int
    is_local: bool = False
    sent: list[Sent] = field(default_factory=list)

    def send_interest(self, wire: bytes) -> None:
        self.sent.append(("interest", wire, None, None))

    def send_data(
        self, wire: bytes, pit_token: bytes | None = None, congestion_mark: int = 0
    ) -> None:
        self.sent.append(("data", wire, pit_token, congestion_mark))

    def send_nack(self, interest_wire: bytes, reason: int, pit_token: bytes | None = None) -> None:
        self.sent.append(("nack", interest_wire, pit_token, reason))

    def kinds(self) -> list[str]:
        return [s[0] for s in self.sent]

    def of(self, kind: str) -> list[Sent]:
        return [s for s in self.sent if s[0] == kind]

    def interests(self) -> list[InterestView]:
        return [parse_interest(s[1]) for s in self.of("interest")]

    def clear(self) -> None:
        self.sent.clear()


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class Net:
    """A forwarder with fake faces: ``net.faces[i]`` is face ``i``."""

    def __init__(
        self,
        n_faces: int = 4,
        local: tuple[int, ...] = (),
        limits: TableLimits | None = None,
        default_strategy: str = "best-route",
    ) -> None:
        self.clock = FakeClock()
        self.fw = Forwarder(
            limits or TableLimits(), clock=self.clock, default_strategy=default_strategy
        )
        self.faces: dict[int, FakeFace] = {}
        for i in range(1, n_faces + 1):
            self.add_face(i, is_local=i in local)

    def add_face(self, face_id: int, is_local: bool = False) -> FakeFace:
        face = self.faces[face_id] = FakeFace(face_id, is_local)
        self.fw.add_face(face)
        return face

    def route(self, uri: str, face_id: int, cost: int = 0) -> None:
        assert self.fw.fib.add_nexthop(from_uri(uri), face_id, cost)

    @property
    def counters(self) -> dict[str, int]:
        return self.fw.counters

    def interest(self, face_id: int, wire: bytes, **lp_fields: object) -> None:
        self.fw.receive_interest(face_id, wire, lp(**lp_fields) if lp_fields else None)

    def data(self, face_id: int, wire: bytes, **lp_fields: object) -> None:
        self.fw.receive_data(face_id, wire, lp(**lp_fields) if lp_fields else None)

    def nack(self, face_id: int, interest_wire: bytes, reason: int, **lp_fields: object) -> None:
        self.fw.receive_nack(face_id, interest_wire, lp(nack_reason=reason, **lp_fields))

    def sent(self) -> dict[int, list[Sent]]:
        return {i: list(f.sent) for i, f in self.faces.items() if f.sent}

    def clear(self) -> None:
        for f in self.faces.values():
            f.clear()


def lp(**fields: object) -> LpView:
    view = LpView()
    for k, v in fields.items():
        setattr(view, k, v)
    return view


def nonce(i: int) -> bytes:
    return i.to_bytes(4, "big")


def interest(
    uri: str,
    n: int = 1,
    *,
    cbp: bool = False,
    mbf: bool = False,
    lifetime: int | None = None,
    hop_limit: int | None = None,
) -> bytes:
    return make_interest(
        from_uri(uri),
        nonce=nonce(n),
        can_be_prefix=cbp,
        must_be_fresh=mbf,
        lifetime=lifetime,
        hop_limit=hop_limit,
    )


def data(uri: str, content: bytes = b"x", *, freshness: int | None = None) -> bytes:
    return make_data(from_uri(uri), content, freshness=freshness)


# -- reflexive forwarding: a Trigger Interest ends its name with the Reflexive Name Segment, a
# Reflexive Interest (and its Data) starts with it.


def ti(
    uri: str, rnp: bytes, n: int = 1, *, lifetime: int | None = None, hop_limit: int | None = None
) -> bytes:
    return make_interest(
        from_uri(uri) + reflexive_component(rnp),
        nonce=nonce(n),
        lifetime=lifetime,
        hop_limit=hop_limit,
    )


def ri(
    rnp: bytes,
    suffix: str = "/args",
    n: int = 1,
    *,
    lifetime: int | None = None,
    hop_limit: int | None = None,
) -> bytes:
    return make_interest(
        reflexive_component(rnp) + from_uri(suffix),
        nonce=nonce(n),
        lifetime=lifetime,
        hop_limit=hop_limit,
    )


def rdata(rnp: bytes, suffix: str = "/args", content: bytes = b"rd") -> bytes:
    return make_data(reflexive_component(rnp) + from_uri(suffix), content, freshness=10_000)


def tdata(uri: str, rnp: bytes, content: bytes = b"td") -> bytes:
    return make_data(from_uri(uri) + reflexive_component(rnp), content, freshness=10_000)
