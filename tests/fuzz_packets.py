"""Mutated NDN packets from a fixed seed, for every fuzz test of the project.

:func:`seeds` are valid Interests, Data, LpPackets and fragments; :class:`Mutator` damages them
blindly (bit flips, truncation, length-field corruption, splicing) and structurally (elements
dropped, repeated, reordered, retyped, with every length recomputed so the damage reaches the
inner rules), plus random TLV soup.  A seeded ``random.Random`` keeps every run the same.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from icn import tlv_types as T
from icn.encode import DataTemplate, make_data, make_interest
from icn.errors import DecodeError
from icn.fragment import Fragmenter
from icn.lp import encode_lp, encode_nack
from icn.name import from_uri, reflexive_component, segment
from icn.tlv import encode_varnum, read_tl

Node = tuple[int, "bytes | list[Node]"]
# Types whose value is itself a sequence of TLVs worth mutating inside.
_CONTAINERS = frozenset(
    (
        T.INTEREST,
        T.DATA,
        T.LP_PACKET,
        T.NAME,
        T.META_INFO,
        T.SIGNATURE_INFO,
        T.FORWARDING_HINT,
        T.LP_NACK,
        T.LP_CACHE_POLICY,
        T.KEY_LOCATOR,
        T.INTEREST_SIGNATURE_INFO,
        T.FINAL_BLOCK_ID,
    )
)
_TYPES = sorted(
    {1, 2, 5, 6, 7, 8, 9, 10, 12, 13, 18, 20, 21, 22, 23, 24, 25, 26, 27, 28, 30, 31, 32, 33, 34}
    | {36, 44, 46, 50, 54, 59, 80, 81, 82, 83, 98, 100, 128, 129, 252, 253, 800, 801, 804, 805}
    | {812, 816, 820, 821, 832, 836, 840, 844, 848, 960, 65535, 65536}
)
_INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFC, 0xFD, 0xFE, 0xFF)


def seeds() -> list[bytes]:
    name = from_uri("/fuzz/name") + segment(7)
    interests = [
        make_interest(name, nonce=b"abcd"),
        make_interest(name, nonce=b"abcd", lifetime=100, can_be_prefix=True, must_be_fresh=True),
        make_interest(name, hop_limit=5, forwarding_hint=[from_uri("/h1"), from_uri("/h/2")]),
        make_interest(name, app_params=b"params", hop_limit=1),
        make_interest(reflexive_component(bytes(16)) + name, lifetime=2**33),
        bytes.fromhex("051b070b08036e646e080474657374210012000a04010203040c0203e8"),
    ]
    datas = [
        make_data(name, b"content", freshness=1000, final_block_id=segment(9)),
        make_data(name, b"", content_type=T.CONTENT_KEY, signer=None),
        DataTemplate(freshness=10).build(name, bytes(300)),
        make_data(b"", b"x" * 40),
    ]
    lps = [
        encode_nack(interests[0], T.NACK_NO_ROUTE, pit_token=b"tok"),
        encode_lp(datas[0], pit_token=b"\x01" * 32, congestion_mark=1, incoming_face_id=9),
        encode_lp(interests[1], next_hop_face_id=3, cache_policy=1, sequence=5),
        encode_lp(None, sequence=1),
    ]
    fragmenter = Fragmenter(80)
    fragmenter.next_sequence = 2**64 - 3
    fragments = fragmenter.fragment(datas[2], pit_token=b"pt") + fragmenter.fragment(datas[0])
    return interests + datas + lps + fragments


def to_tree(buf: bytes) -> list[Node] | None:
    """Split ``buf`` into TLVs, recursing into containers; None if it does not split cleanly."""
    nodes: list[Node] = []
    off = 0
    try:
        while off < len(buf):
            typ, vstart, off = read_tl(buf, off, len(buf))
            value = buf[vstart:off]
            inner = to_tree(value) if typ in _CONTAINERS or typ == T.LP_FRAGMENT else None
            nodes.append((typ, inner if inner else value))
    except DecodeError:
        return None
    return nodes


def from_tree(nodes: list[Node]) -> bytes:
    out = []
    for typ, value in nodes:
        raw = value if isinstance(value, bytes) else from_tree(value)
        out.append(encode_varnum(typ) + encode_varnum(len(raw)) + raw)
    return b"".join(out)


class Mutator:
    """Byte-level and tree-level mutations of the seeds."""

    def __init__(self, rnd: random.Random, corpus: list[bytes]) -> None:
        self.rnd = rnd
        self.corpus = corpus
        self.trees = [t for t in (to_tree(s) for s in corpus) if t]

    def next(self) -> bytes:
        r = self.rnd.random()
        if r < 0.08:
            return self.soup()
        if r < 0.5:
            return self.tree_mutation()
        wire = bytearray(self.rnd.choice(self.corpus))
        for _ in range(self.rnd.choice((1, 1, 1, 2, 3))):
            self.rnd.choice(self._byte_ops)(self, wire)
        return bytes(wire)

    # --- blind byte mutations
    def flip(self, w: bytearray) -> None:
        if w:
            i = self.rnd.randrange(len(w))
            w[i] ^= 1 << self.rnd.randrange(8)

    def set_byte(self, w: bytearray) -> None:
        if w:
            w[self.rnd.randrange(len(w))] = self.rnd.choice(_INTERESTING_BYTES)

    def truncate(self, w: bytearray) -> None:
        del w[self.rnd.randrange(len(w) + 1) :]

    def extend(self, w: bytearray) -> None:
        w.extend(self.rnd.randbytes(self.rnd.randrange(1, 8)))

    def insert(self, w: bytearray) -> None:
        at = self.rnd.randrange(len(w) + 1)
        w[at:at] = self.rnd.randbytes(self.rnd.randrange(1, 5))

    def delete(self, w: bytearray) -> None:
        if w:
            at = self.rnd.randrange(len(w))
            del w[at : at + self.rnd.randrange(1, 5)]

    def length(self, w: bytearray) -> None:
        """Overwrite a byte right after a plausible TYPE with a length-like value."""
        if len(w) > 1:
            at = self.rnd.randrange(1, len(w))
            w[at : at + 1] = self._varnum_like()

    def splice(self, w: bytearray) -> None:
        other = self.rnd.choice(self.corpus)
        at = self.rnd.randrange(len(w) + 1)
        w[at:] = other[self.rnd.randrange(len(other) + 1) :]

    _byte_ops: tuple[Callable[[Mutator, bytearray], None], ...] = (
        flip,
        flip,
        set_byte,
        truncate,
        extend,
        insert,
        delete,
        length,
        length,
        splice,
    )

    def _varnum_like(self) -> bytes:
        pick = self.rnd.randrange(6)
        if pick == 0:
            return bytes((self.rnd.randrange(253),))
        if pick == 1:
            return b"\xfd" + self.rnd.randrange(0, 512).to_bytes(2, "big")  # often non-minimal
        if pick == 2:
            return b"\xfe" + self.rnd.randrange(0, 70000).to_bytes(4, "big")
        if pick == 3:
            return b"\xff" + self.rnd.randrange(0, 2**33).to_bytes(8, "big")
        return bytes((self.rnd.choice(_INTERESTING_BYTES),))

    # --- structural mutations: lengths stay consistent, so the inner rules get exercised
    def tree_mutation(self) -> bytes:
        tree = self._copy(self.rnd.choice(self.trees))
        for _ in range(self.rnd.choice((1, 1, 2, 3))):
            self._mutate_list(tree, depth=0)
        return from_tree(tree)

    def _copy(self, nodes: list[Node]) -> list[Node]:
        return [(t, v if isinstance(v, bytes) else self._copy(v)) for t, v in nodes]

    def _mutate_list(self, nodes: list[Node], depth: int) -> None:
        containers = [i for i, (_, v) in enumerate(nodes) if not isinstance(v, bytes)]
        if containers and self.rnd.random() < 0.6:
            i = self.rnd.choice(containers)
            inner = nodes[i][1]
            assert not isinstance(inner, bytes)
            self._mutate_list(inner, depth + 1)
            return
        op = self.rnd.randrange(7)
        i = self.rnd.randrange(len(nodes)) if nodes else 0
        if op == 0 and nodes:
            del nodes[i]
        elif op == 1 and nodes:
            nodes.insert(self.rnd.randrange(len(nodes) + 1), nodes[i])
        elif op == 2 and len(nodes) > 1:
            j = self.rnd.randrange(len(nodes))
            nodes[i], nodes[j] = nodes[j], nodes[i]
        elif op == 3 and nodes:
            nodes[i] = (self.rnd.choice(_TYPES), nodes[i][1])
        elif op == 4 and nodes and isinstance(leaf := nodes[i][1], bytes):
            value = bytearray(leaf)
            self.rnd.choice((Mutator.flip, Mutator.truncate, Mutator.extend, Mutator.set_byte))(
                self, value
            )
            nodes[i] = (nodes[i][0], bytes(value))
        elif op == 5:
            nodes.insert(self.rnd.randrange(len(nodes) + 1), self._random_node(depth))
        else:
            self.rnd.shuffle(nodes)

    def _random_node(self, depth: int) -> Node:
        typ = self.rnd.choice(_TYPES)
        if typ in _CONTAINERS and depth < 4 and self.rnd.random() < 0.5:
            return typ, [self._random_node(depth + 1) for _ in range(self.rnd.randrange(4))]
        return typ, self.rnd.randbytes(self.rnd.choice((0, 1, 2, 4, 8, 32, self.rnd.randrange(40))))

    def soup(self) -> bytes:
        """Random TLVs, sometimes wrapped as a packet."""
        nodes = [self._random_node(1) for _ in range(self.rnd.randrange(1, 6))]
        if self.rnd.random() < 0.7:
            outer = self.rnd.choice((T.INTEREST, T.DATA, T.LP_PACKET))
            if outer != T.LP_PACKET and self.rnd.random() < 0.7:
                nodes.insert(0, (T.NAME, [self._random_node(3) for _ in range(3)]))
            nodes = [(outer, nodes)]
        return from_tree(nodes)
