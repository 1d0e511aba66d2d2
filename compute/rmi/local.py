"""Calls in a session between processes of one host: arguments and results in a memory file of
the caller's, the packets carrying only where they are (the out-of-band path of docs/design.md
section 4).

Measured before this (CHANGELOG.md, 2026-11-26): a 64 KiB call in a session
cost five SHA-256 passes over its payload (the HMACs and the parameters digest the packet format
requires) and four socket writes of it through the forwarder, where gRPC over TCP hashes nothing
and writes it twice.  A memory file mapped once and reused costs a copy in and a copy out.

- The caller makes one file per session (``LocalFile``, sparse: only written pages take memory)
  of ``slots`` slots, each with room for arguments and for an answer and a stamp.  A call with
  arguments larger than ``MIN_SHARED``, or of a function whose answers came larger, takes a free
  slot (other calls stay as they were: naming a slot cost small calls a tenth of their rate),
  copies its packed arguments there if large and names the slot in its session Interest's
  parameters, under the session's HMAC like the rest: ``[pid, fd, token, tag, slot, args
  length]``.  The server keeps, per session, the file it checked last (``LocalProof``): later
  calls naming it skip the tag and the lookup.
- ``tag`` proves the two ends share a host before the server opens anything: an HMAC, under the
  session's key, of the host's boot id (random per boot, never sent).  A caller on another host
  cannot make it; the server refuses a call without the right one (``NotLocal``), before any
  work, and the caller sends that session's calls in packets from then on.
- The server maps the caller's file read-write (``icn.dataplane.memfile``: a memfd of this kind
  whose token matches, which the kernel lets only the same user open), reads the arguments where
  they lie, and writes an answer larger than ``MIN_SHARED`` into the slot: stamp -1, the bytes,
  then the call's sequence number as stamp.  Its Data says only ``{"s": "local", "n": length}``.
  Smaller answers, and any answer when the file cannot be written, ride in the Data as before.
- The caller checks the stamp before and after copying the answer out: a slot whose earlier call
  ended unanswered (timed out, cancelled) is never taken again, so a late answer to it cannot land
  in another call's slot; the stamp makes any such case an error, never a wrong result.
- The server's reply cache keeps the small Data: a retransmission is answered with it, and the
  slot still holds the answer (the call has not ended on the caller's side).
- Private calls (sealed under the session's key) and calls of pure or idempotent functions (which
  take the full exchange, for caches and clones) keep their payloads in packets.
"""

from __future__ import annotations

import hmac
from typing import Any

from compute.rmi.errors import BadArguments, NotLocal, ProtocolError
from icn.dataplane.memfile import (
    HEAD,
    MemFile,
    MemFileError,
    PeerFile,
    PeerFiles,
    boot_id,
)
from icn.security.hmac_signer import HmacSigner

MAGIC = b"ICNRMI1\0"
SLOTS = 64  # calls in flight per session with their payloads in the file; more go in packets
SLOT_ARGS = 1 << 20  # the largest packed arguments a slot holds
SLOT_ANSWER = 1 << 20  # the largest answer a slot holds
MIN_SHARED = 4096  # payloads up to this size ride in the packets (cheaper than the stamps)
TAG_LEN = 16
_ALIGN = 64
_DATA_AT = 128  # the slots start here, after the header
_SLOT_HEAD = 64  # a slot's stamp (int64), then padding to the arguments
_HOST_INFO = b"icn-rmi same host\0"
_NO_STAMP = (-1).to_bytes(8, "little", signed=True)  # a slot being written, or not yet


def _round_up(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def host_tag(signer: HmacSigner) -> bytes:
    """What proves, under a session's key, that its two ends share this host."""
    return signer.sign_parts(_HOST_INFO, boot_id())[:TAG_LEN]


class _Layout:
    """Where slot ``i``'s stamp, arguments and answer are in a file of this kind."""

    __slots__ = ("answer_cap", "args_cap", "slot_bytes", "slots")

    def __init__(self, slots: int, args_cap: int, answer_cap: int) -> None:
        self.slots, self.args_cap, self.answer_cap = slots, args_cap, answer_cap
        self.slot_bytes = _round_up(_SLOT_HEAD + args_cap + answer_cap)

    def size(self) -> int:
        return _DATA_AT + self.slots * self.slot_bytes

    def stamp_at(self, slot: int) -> int:
        return _DATA_AT + slot * self.slot_bytes

    def args_at(self, slot: int) -> int:
        return self.stamp_at(slot) + _SLOT_HEAD

    def answer_at(self, slot: int) -> int:
        return self.args_at(slot) + self.args_cap

    def header(self) -> bytes:
        return b"".join(
            x.to_bytes(8, "little") for x in (self.slots, self.args_cap, self.answer_cap)
        )

    @classmethod
    def read(cls, peer: PeerFile) -> _Layout:
        raw = peer.map[HEAD : HEAD + 24]
        slots, args_cap, answer_cap = (int.from_bytes(raw[i : i + 8], "little") for i in (0, 8, 16))
        layout = cls(slots, args_cap, answer_cap)
        if slots == 0 or layout.size() > len(peer.map):
            raise MemFileError("a call file shorter than its header says")
        return layout


class LocalFile:
    """The caller's file of one session, and which of its slots are free."""

    def __init__(
        self,
        signer: HmacSigner,
        slots: int = SLOTS,
        args_cap: int = SLOT_ARGS,
        answer_cap: int = SLOT_ANSWER,
    ) -> None:
        self.layout = _Layout(slots, args_cap, answer_cap)
        self.file = MemFile("icn-rmi-calls", self.layout.size(), MAGIC)
        self.file.map[HEAD : HEAD + 24] = self.layout.header()
        self.ref = [self.file.pid, self.file.fd, self.file.token, host_tag(signer)]
        self.free = list(range(slots - 1, -1, -1))
        self.retired = 0  # slots whose call ended unanswered: never taken again
        self.closing = False  # its session ended: closed once no call holds a slot

    def take(self) -> int | None:
        """A free slot (its stamp cleared), or None when every slot is in use."""
        if not self.free:
            return None
        slot = self.free.pop()
        at = self.layout.stamp_at(slot)
        self.file.map[at : at + 8] = _NO_STAMP
        return slot

    def give_back(self, slot: int, answered: bool) -> None:
        if answered:
            self.free.append(slot)
        else:
            self.retired += 1
        if self.closing:
            self.retire()

    def usable(self) -> bool:
        """False once half the slots are retired: the session then makes a new file."""
        return not self.closing and self.retired < self.layout.slots // 2

    def retire(self) -> None:
        """No more calls take a slot; the file is closed once the calls holding one end."""
        self.closing = True
        if len(self.free) + self.retired == self.layout.slots and not self.file.map.closed:
            self.close()

    def put_args(self, slot: int, blob: bytes) -> list[Any]:
        """Copy ``blob`` into the slot; the reference the call's parameters carry."""
        at = self.layout.args_at(slot)
        self.file.map[at : at + len(blob)] = blob
        return [*self.ref, slot, len(blob)]

    def slot_ref(self, slot: int) -> list[Any]:
        """The reference of a slot whose call's arguments ride in the packet."""
        return [*self.ref, slot, 0]

    def answer(self, slot: int, seq: int, length: int, function: str) -> bytes:
        """The answer the server wrote in the slot for call ``seq``, copied out."""
        layout = self.layout
        if not 0 <= length <= layout.answer_cap:
            raise ProtocolError(f"an answer of {length} octets does not fit its slot", function)
        m = self.file.map
        stamp = layout.stamp_at(slot)
        want = seq.to_bytes(8, "little", signed=True)
        at = layout.answer_at(slot)
        if m[stamp : stamp + 8] == want:
            content = m[at : at + length]
            if m[stamp : stamp + 8] == want:
                return content
        raise ProtocolError("the answer's slot does not hold this call's answer", function)

    def close(self) -> None:
        self.closing = True
        self.file.close()


class LocalSlot:
    """A call's slot in its caller's file, as the server sees it."""

    __slots__ = ("layout", "nargs", "peer", "slot")

    def __init__(self, peer: PeerFile, layout: _Layout, slot: int, nargs: int) -> None:
        self.peer, self.layout, self.slot, self.nargs = peer, layout, slot, nargs

    def args(self) -> memoryview:
        at = self.layout.args_at(self.slot)
        return memoryview(self.peer.map)[at : at + self.nargs]

    def put_answer(self, content: bytes, seq: int) -> bool:
        """Write ``content`` as call ``seq``'s answer; False when it does not fit or the file is
        gone (the answer then rides in the Data)."""
        layout = self.layout
        if len(content) > layout.answer_cap or self.peer.map.closed:
            return False
        stamp_at = layout.stamp_at(self.slot)
        at = layout.answer_at(self.slot)
        m = self.peer.map
        m[stamp_at : stamp_at + 8] = _NO_STAMP
        m[at : at + len(content)] = content
        m[stamp_at : stamp_at + 8] = seq.to_bytes(8, "little", signed=True)
        return True


class LocalProof:
    """What a server session keeps of its caller's file once checked: the reference's first
    four fields (pid, fd, token, host tag) and the file, mapped."""

    __slots__ = ("head", "layout", "peer")

    def __init__(self) -> None:
        self.head: list[Any] | None = None
        self.peer: PeerFile | None = None
        self.layout = _Layout(1, 0, 0)


class LocalFiles:
    """The server's mappings of its callers' files."""

    def __init__(self) -> None:
        self._files = PeerFiles(MAGIC, writable=True)

    def slot(
        self, ref: Any, signer: HmacSigner, function: str, proof: LocalProof | None = None
    ) -> LocalSlot:
        """The slot a session call names: NotLocal when the caller is not on this host or its
        file cannot be opened here, BadArguments for a malformed or out-of-range reference.
        ``proof`` (the session's) keeps the file checked last, so the session's next calls
        naming it skip the host tag and the lookup."""
        if not isinstance(ref, list) or len(ref) != 6:
            raise BadArguments("a local call's reference is a list of 6 fields", function)
        slot, nargs = ref[4], ref[5]
        if type(slot) is not int or type(nargs) is not int or slot < 0 or nargs < 0:
            raise BadArguments("a local call's reference has a field of the wrong type", function)
        head = ref[:4]
        if proof is not None and proof.head == head and proof.peer is not None:
            peer, layout = proof.peer, proof.layout
            if peer.map.closed:  # (closed as the least recently used of the mappings)
                peer, layout = self._open(head, signer, function)
        else:
            peer, layout = self._open(head, signer, function)
        if proof is not None:
            proof.head, proof.peer, proof.layout = head, peer, layout
        if slot >= layout.slots or nargs > layout.args_cap:
            raise BadArguments("a local call's reference is out of its file", function)
        return LocalSlot(peer, layout, slot, nargs)

    def _open(self, head: list[Any], signer: HmacSigner, function: str) -> tuple[PeerFile, _Layout]:
        pid, fd, token, tag = head
        if (
            not all(type(x) is int and x >= 0 for x in (pid, fd))
            or not isinstance(token, bytes)
            or not isinstance(tag, bytes)
        ):
            raise BadArguments("a local call's reference has a field of the wrong type", function)
        if not hmac.compare_digest(tag, host_tag(signer)):
            raise NotLocal("the caller is not on this server's host", function)
        try:
            peer = self._files.get(pid, fd, token)
            layout = peer.layout
            if not isinstance(layout, _Layout):
                layout = peer.layout = _Layout.read(peer)
        except MemFileError as exc:
            raise NotLocal(f"cannot open the caller's call file ({exc})", function) from None
        return peer, layout

    def close(self) -> None:
        self._files.close()
