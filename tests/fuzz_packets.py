"""Mutated NDN packets from a fixed seed, for every fuzz test of the project.

:func:`seeds` are valid Interests, Data, LpPackets and fragments; :class:`Mutator` damages them
blindly (bit flips, truncation, length-field corruption, splicing) and structurally (elements
dropped, repeated, reordered, retyped, with every length recomputed so the damage reaches the
inner rules), plus random TLV soup.  A seeded ``random.Random`` keeps every run the same.

:class:`WireFuzzer` is what a forwarder's faces get from a broken or hostile peer: the same
mutations of :func:`wire_seeds` (every kind of packet a forwarder reads, management commands
included) plus the damage only a wire does (huge VAR-NUMBERs, lying lengths, swapped types,
concatenations, empty and maximum-size packets).  :class:`StreamFraming` replays the
forwarder's stream framing, so a test knows what a byte stream of them does to a connection.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from icn.dataplane.mgmt_client import command_name
from icn.errors import DecodeError
from icn.security.signed_interest import make_signed_interest
from icn.wire import tlv_types as T
from icn.wire.encode import DataTemplate, make_data, make_interest
from icn.wire.fragment import Fragmenter
from icn.wire.lp import encode_lp, encode_nack
from icn.wire.name import from_uri, generic, reflexive_component, segment
from icn.wire.signer import DIGEST_SHA256
from icn.wire.tlv import (
    encode_nni_tlv,
    encode_tlv,
    encode_varnum,
    frame_length,
    read_tl,
    read_varnum,
)

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
        make_interest(
            name, nonce=b"hint", hop_limit=5, forwarding_hint=[from_uri("/h1"), from_uri("/h/2")]
        ),
        make_interest(name, nonce=b"parm", app_params=b"params", hop_limit=1),
        make_interest(reflexive_component(bytes(16)) + name, nonce=b"refl", lifetime=2**33),
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


# ---- what a forwarder reads off a wire, and what a wire (or a peer) can do to it ---------------

# Every type a stream face accepts as the first octet of a frame (stream.py's _FRAME_TYPES).
FRAME_TYPES = (T.INTEREST, T.DATA, T.LP_PACKET)


class _AnyKeySigner:
    """Ed25519 SignatureType with a KeyLocator and a value of the right size.  The forwarder
    accepts keyed command signatures that are well formed (NFD's ``trust-anchor any``), so a
    mutated command signed this way reaches the management handlers with damaged parameters,
    where a DigestSha256 one mostly stops at the digest check."""

    def signature_info(self) -> bytes:
        return encode_nni_tlv(T.SIGNATURE_TYPE, T.SIG_ED25519) + encode_tlv(
            T.KEY_LOCATOR, encode_tlv(T.NAME, from_uri("/fuzz/KEY/%01"))
        )

    def sign(self, signed_portion: bytes) -> bytes:
        return bytes(64)


def _commands(sig_time_ms: int) -> list[bytes]:
    """Management commands in both forms python-ndn sends, digest- and key-signed at
    ``sig_time_ms``.  None creates a face or shapes a link: a mutated FaceUri must not make the
    forwarder send off the loopback."""
    cmds = [
        command_name("rib", "register", name="/fuzz/reg", face_id=0, cost=5),
        command_name("rib", "unregister", name="/fuzz/reg", face_id=0),
        command_name(
            "strategy-choice", "set", name="/fuzz", strategy="/localhost/nfd/strategy/multicast"
        ),
        command_name("cs", "config", capacity=100),
        command_name("faces", "update", face_id=0, flags=1, mask=1),
        generic("localhost") + generic("nfd") + generic("nosuch") + generic("verb"),
    ]
    out = []
    for i, name in enumerate(cmds):
        for signer, tag in ((DIGEST_SHA256, b"dgst"), (_AnyKeySigner(), b"keyd")):
            out.append(
                make_signed_interest(
                    name,
                    signer=signer,
                    lifetime=1000,
                    nonce=b"%c%03d" % (tag[0], i),
                    sig_nonce=tag + b"%04d" % i,
                    sig_time_ms=sig_time_ms,
                )
            )
    # NDNApp.register's v0.2 form: timestamp, nonce, SignatureInfo and a DigestSha256
    # SignatureValue over the name so far, as name components
    info = encode_tlv(T.SIGNATURE_INFO, DIGEST_SHA256.signature_info())
    v1 = command_name("rib", "register", name="/fuzz/v1") + generic(sig_time_ms.to_bytes(8, "big"))
    v1 += generic(b"v1nonce!") + generic(info)
    v1 += generic(encode_tlv(T.SIGNATURE_VALUE, DIGEST_SHA256.sign(v1)))
    out.append(make_interest(v1, nonce=b"v1v1", lifetime=1000))
    return out


# SignatureTime of the seed commands unless told: reproducible, but a forwarder refuses them as
# stale (it takes times within 2 minutes of its clock), so a test against one passes the time.
FIXED_SIG_TIME_MS = 1_700_000_000_000


def wire_seeds(sig_time_ms: int = FIXED_SIG_TIME_MS) -> list[bytes]:
    """Valid packets of every kind a forwarder reads: Interests with and without parameters,
    signed ones, management commands (signed at ``sig_time_ms``) and dataset requests, Data,
    Nacks, PitTokens and the other NDNLPv2 fields, fragments; :func:`seeds` too.  The same
    bytes for the same ``sig_time_ms``."""
    name = from_uri("/fuzz/wire") + segment(3)
    plain = make_interest(name, nonce=b"wire", lifetime=1000)
    params = make_interest(
        from_uri("/fuzz/params"), nonce=b"parm", app_params=b"\x80\x02ab", hop_limit=9
    )
    signed = make_signed_interest(
        from_uri("/fuzz/signed"),
        app_params=b"x",
        nonce=b"sign",
        sig_nonce=b"12345678",
        sig_time_ms=sig_time_ms,
    )
    status = generic("localhost") + generic("nfd") + generic("status") + generic("general")
    datasets = [
        make_interest(status, nonce=b"stat", can_be_prefix=True, must_be_fresh=True),
        make_interest(
            generic("localhop") + generic("nfd") + generic("rib") + generic("list"), nonce=b"ribl"
        ),
        make_interest(from_uri("/localhost/nfd/faces/list"), nonce=b"face", must_be_fresh=True),
    ]
    data = make_data(name, b"wire data", freshness=500)
    keyed = make_data(from_uri("/fuzz/keyed"), bytes(200), signer=_AnyKeySigner())
    big = make_data(from_uri("/fuzz/big"), bytes(1000))
    lps = [
        encode_lp(plain, pit_token=b"\x01" * 8),
        encode_lp(data, pit_token=b"\x02" * 32, congestion_mark=1),
        encode_lp(plain, next_hop_face_id=1),
        encode_lp(data, cache_policy=T.CACHE_POLICY_NO_CACHE),
        encode_lp(None, sequence=7),
        *(encode_nack(plain, reason, pit_token=b"nk") for reason in (0, 50, 100, 150)),
    ]
    fragmenter = Fragmenter(300)
    fragmenter.next_sequence = 1000  # not random: the same bytes every run
    fragments = fragmenter.fragment(big, pit_token=b"fr") + fragmenter.fragment(signed)
    return [
        *seeds(),
        plain,
        params,
        signed,
        *datasets,
        *_commands(sig_time_ms),
        data,
        keyed,
        *lps,
        *fragments,
    ]


def tlv_headers(wire: bytes) -> list[tuple[int, int, int]]:
    """(TYPE offset, LENGTH offset, LENGTH end) of every TLV in ``wire``, inside containers too;
    what parses of a damaged packet."""
    out: list[tuple[int, int, int]] = []

    def walk(start: int, end: int, depth: int) -> None:
        off = start
        while off < end:
            try:
                _, loff = read_varnum(wire, off, end)
                _, lend = read_varnum(wire, loff, end)
                typ, vstart, vend = read_tl(wire, off, end)
            except DecodeError:
                return
            out.append((off, loff, lend))
            if depth < 6 and (typ in _CONTAINERS or typ == T.LP_FRAGMENT):
                walk(vstart, vend, depth + 1)
            off = vend

    walk(0, len(wire), 0)
    return out


def exact_size_data(size: int) -> bytes:
    """A valid Data of exactly ``size`` octets (``size`` >= 64)."""
    name = from_uri("/fuzz/max")
    pad = size - len(make_data(name, b"", signer=None))
    while pad >= 0:
        wire = make_data(name, bytes(pad), signer=None)
        if len(wire) == size:
            return wire
        pad -= 1  # a longer TLV-LENGTH took an octet: try one less
    raise ValueError(f"no Data of {size} octets")


class WireFuzzer(Mutator):
    """Link packets as a broken or hostile peer sends them, from a fixed seed.

    Half come from :class:`Mutator` (over :func:`wire_seeds`); the rest are what only a wire
    sees: huge or non-minimal VAR-NUMBERs in any TLV header, a container whose length lies about
    what it holds (its parents' lengths recomputed, so the lie is found deep inside), swapped
    top-level types, packets concatenated, zero-length ones, unmodified valid ones, and, at
    ``big_rate``, packets at or just over the face's limits: ``max_packet`` (the largest
    Interest/Data) and ``max_packet + LP_HEADER_ROOM`` (the largest frame).
    """

    def __init__(
        self,
        seed: int,
        *,
        max_packet: int,
        big_rate: float = 0.002,
        sig_time_ms: int = FIXED_SIG_TIME_MS,
    ) -> None:
        super().__init__(random.Random(seed), wire_seeds(sig_time_ms))
        self.max_packet = max_packet
        self.max_frame = max_packet + T.LP_HEADER_ROOM
        self.big_rate = big_rate
        self._headers = [tlv_headers(c) for c in self.corpus]

    def next(self) -> bytes:
        rnd = self.rnd
        if rnd.random() < self.big_rate:
            return self.max_size()
        r = rnd.random()
        if r < 0.5:
            return super().next()
        if r < 0.6:
            return self.huge_varnum()
        if r < 0.7:
            return self.length_lie()
        if r < 0.78:
            return self.type_swap()
        if r < 0.86:
            return self.concatenation()
        if r < 0.9:
            return rnd.choice(_ZERO_LENGTH)
        return rnd.choice(self.corpus)  # valid ones: the forwarder must still take them

    def next_framed(self, keep: float) -> bytes:
        """One packet for a byte stream.  With probability ``keep`` its outer header is made to
        frame exactly its bytes, with a type a stream face accepts, so the damage stays inside
        the packet and the connection lives on; otherwise as :meth:`next` made it, which may
        desynchronise the stream (the forwarder then closes the connection)."""
        wire = self.next()
        if self.rnd.random() >= keep:
            return wire
        typ, body = wire[0] if wire else T.INTEREST, wire
        try:
            t, off = read_varnum(wire, 0, len(wire))
            _, off = read_varnum(wire, off, len(wire))
            typ, body = t, wire[off:]
        except DecodeError:
            pass
        if typ not in FRAME_TYPES:
            typ = self.rnd.choice(FRAME_TYPES)
        return encode_varnum(typ) + encode_varnum(len(body)) + body

    def huge_varnum(self) -> bytes:
        """One TLV-TYPE or TLV-LENGTH rewritten as a 3-, 5- or 9-octet VAR-NUMBER: far too large
        (up to 2^64-1), or the right value in a non-minimal form."""
        i = self.rnd.randrange(len(self.corpus))
        wire, headers = self.corpus[i], self._headers[i]
        toff, loff, lend = self.rnd.choice(headers)
        start, end = (toff, loff) if self.rnd.random() < 0.25 else (loff, lend)
        value, _ = read_varnum(wire, start, end)
        pick = self.rnd.randrange(5)
        if pick == 0:
            field = b"\xff" + self.rnd.choice((2**32, 2**63, 2**64 - 1)).to_bytes(8, "big")
        elif pick == 1:
            field = b"\xff" + self.rnd.randrange(2**64).to_bytes(8, "big")
        elif pick == 2:
            field = b"\xfe" + self.rnd.randrange(2**16, 2**32).to_bytes(4, "big")
        elif pick == 3 and value < 2**32:
            field = b"\xfe" + value.to_bytes(4, "big")  # non-minimal
        else:
            field = b"\xff" + value.to_bytes(8, "big")  # non-minimal
        return wire[:start] + field + wire[end:]

    def length_lie(self) -> bytes:
        """A TLV inside the packet claims a few octets more or less than it holds (or far more);
        every enclosing length is recomputed, so only the inner rules can catch it."""
        tree = self._copy(self.rnd.choice(self.trees))
        targets: list[tuple[list[Node], int]] = []

        def collect(nodes: list[Node], depth: int) -> None:
            for i, (_, value) in enumerate(nodes):
                if depth > 0:
                    targets.append((nodes, i))
                if not isinstance(value, bytes):
                    collect(value, depth + 1)

        collect(tree, 0)
        if not targets:
            return from_tree(tree)
        nodes, i = self.rnd.choice(targets)
        typ, value = nodes[i]
        raw = value if isinstance(value, bytes) else from_tree(value)
        delta = self.rnd.choice((-3, -2, -1, 1, 2, 3, 100, self.rnd.randrange(253, 70000)))
        lie = encode_varnum(typ) + encode_varnum(max(0, len(raw) + delta)) + raw
        nodes[i] = (_RAW, lie)
        return _render(tree)

    def type_swap(self) -> bytes:
        """A packet under another top-level type: Interest as Data, Data as LpPacket, an
        LpPacket as a Name..."""
        wire = self.rnd.choice(self.corpus)
        _, off = read_varnum(wire, 0, len(wire))
        typ = self.rnd.choice((*FRAME_TYPES, *FRAME_TYPES, T.NAME, 0x03, 0xFC, 800, 65535))
        return encode_varnum(typ) + wire[off:]

    def concatenation(self) -> bytes:
        """Two or three packets back to back in one link packet (valid or mutated)."""
        parts = [
            self.rnd.choice(self.corpus) if self.rnd.random() < 0.5 else Mutator.next(self)
            for _ in range(self.rnd.choice((2, 2, 3)))
        ]
        return b"".join(parts)

    def max_size(self) -> bytes:
        """The largest packet and frame the face takes, and one octet more of each: a bare Data,
        or a Data in an LpPacket."""
        size = self.rnd.choice((self.max_packet, self.max_packet + 1))
        data = exact_size_data(size)
        if self.rnd.random() < 0.5:
            return data
        frame = self.rnd.choice((self.max_frame, self.max_frame + 1))
        room = frame - len(encode_lp(exact_size_data(1000), pit_token=b"\x00")) + 1000
        return encode_lp(exact_size_data(room), pit_token=b"\x00" * (1 + frame % 2))


# A node type that from_tree would wrap but _render emits as it is: a TLV with a lying header.
_RAW = -1

_ZERO_LENGTH = (
    b"",
    b"\x05\x00",
    b"\x06\x00",
    b"\x64\x00",
    b"\x05\x02\x07\x00",  # an Interest with an empty Name
    b"\x06\x04\x07\x00\x15\x00",
    b"\x64\x02\x50\x00",  # an LpPacket with an empty Fragment
    b"\x64\x05\x50\x03\x05\x01\x07",
)


def _render(nodes: list[Node]) -> bytes:
    out = []
    for typ, value in nodes:
        if typ == _RAW:
            assert isinstance(value, bytes)
            out.append(value)
            continue
        raw = value if isinstance(value, bytes) else _render(value)
        out.append(encode_varnum(typ) + encode_varnum(len(raw)) + raw)
    return b"".join(out)


class StreamFraming:
    """The forwarder's stream framing (``forwarder/face/stream.py``, ``data_received``) replayed
    on the bytes a test writes to one connection: which frames the forwarder's link service gets
    and why, if at all, the forwarder closes the connection, without asking the forwarder.

    The checks come in the forwarder's order: the first octet must be an accepted type
    (else "face.unknown_type"), the header must decode ("face.bad_tlv"), the frame must fit
    ``max_frame`` ("face.oversize").
    """

    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self.buf = bytearray()
        self.failed: str | None = None

    def feed(self, data: bytes) -> list[bytes]:
        """The frames ``data`` completes; after a failure, nothing more."""
        if self.failed is not None:
            return []
        buf = self.buf
        buf += data
        frames = []
        off = 0
        end = len(buf)
        while off < end:
            if buf[off] not in FRAME_TYPES:
                self.failed = "face.unknown_type"
                break
            try:
                size = frame_length(buf, off, end)
            except DecodeError:
                self.failed = "face.bad_tlv"
                break
            if size is None:
                break
            if size > self.max_frame:
                self.failed = "face.oversize"
                break
            if off + size > end:
                break
            frames.append(bytes(buf[off : off + size]))
            off += size
        del buf[:off]
        return frames
