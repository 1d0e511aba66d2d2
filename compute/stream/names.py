"""Names of a flow: ``/<flow>/<op>/<partition>/seq=N`` for batches, and the progress reports
a reader sends its producer, ``/<flow>/<op>/<partition>/ack/<reader>/<consumed>/<durable>``."""

from __future__ import annotations

from dataclasses import dataclass

from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.name import components_after, from_uri, generic, sequence_num
from icn.wire.tlv import read_nni, read_tl

ACK = generic("ack")


@dataclass(frozen=True)
class Ack:
    reader: str
    consumed: int  # every batch below this one is in the reader's hands
    durable: int  # ... and below this one in its last checkpoint: the producer may drop them


class FlowNames:
    def __init__(self, flow: str) -> None:
        self.flow = from_uri(flow)

    def stream(self, op: str, partition: int) -> bytes:
        return self.flow + generic(op) + generic(str(partition))

    def op(self, op: str) -> bytes:
        return self.flow + generic(op)

    @staticmethod
    def batch(stream: bytes, seq: int) -> bytes:
        return stream + sequence_num(seq)

    @staticmethod
    def ack(stream: bytes, reader: str, consumed: int, durable: int) -> bytes:
        return stream + ACK + generic(reader) + generic(str(consumed)) + generic(str(durable))

    @staticmethod
    def parse(stream: bytes, name: bytes) -> int | Ack | None:
        """The sequence number of a batch name, the Ack of a report, or None (malformed)."""
        comps = components_after(stream, name)
        if not comps:
            return None
        try:
            if len(comps) == 1:
                typ, vstart, vend = read_tl(comps[0], 0, len(comps[0]))
                if typ != T.COMP_SEQUENCE_NUM:
                    return None
                return read_nni(comps[0], vstart, vend)
            if len(comps) == 4 and comps[0] == ACK:
                values = []
                for comp in comps[1:]:
                    typ, vstart, vend = read_tl(comp, 0, len(comp))
                    if typ != T.COMP_GENERIC:
                        return None
                    values.append(comp[vstart:vend].decode())
                consumed, durable = int(values[1]), int(values[2])
                if consumed < 0 or durable < 0:
                    return None
                return Ack(values[0], consumed, durable)
        except (DecodeError, ValueError, UnicodeDecodeError):
            return None
        return None
