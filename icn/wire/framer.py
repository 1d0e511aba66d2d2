"""A sans-IO framer for NDN stream faces: bytes in, whole TLV packets out.

Unix and TCP faces carry TLVs back to back with no other header (what NFD and python-ndn
speak), so a frame is a VAR-NUMBER type, a VAR-NUMBER length and that many octets.  The framer
owns the receive buffer and suits both asyncio protocol styles:

* ``asyncio.BufferedProtocol``: :meth:`get_buffer` lends the free end of the buffer, the socket
  reads straight into it, :meth:`buffer_updated` cuts the frames.  A frame larger than
  ``own_above`` is read, once its header is known, into a second buffer kept for large frames,
  so the rest of it is read straight into place and no later read has to move it;
* ``asyncio.Protocol`` (and tests): :meth:`feed` copies a chunk in and cuts the frames.

Each call returns the frames it completed as ``bytes`` (one copy out of the buffer, which is
then reused; the copy is what makes the frame safe to keep, cache and send on).  Bad framing
never raises: the frames before it are returned and :attr:`error` names what broke the stream
(``"unknown_type"``, ``"bad_tlv"``, ``"oversize"``); nothing is read after it.  With
``skip_oversize`` an oversized frame is skipped and counted in :attr:`skipped` instead (an app
may outlive one packet it cannot hold; a forwarder closes the face).
"""

from __future__ import annotations

from icn.errors import DecodeError
from icn.wire.tlv import frame_length

DEFAULT_CAPACITY = 256 << 10  # the shared buffer: many small packets per read
DEFAULT_OWN_ABOVE = 64 << 10  # larger frames are read into the large-frame buffer
MIN_READ = 16 << 10  # below this much room at the end, the buffer is compacted before a read


class TlvFramer:
    """Cuts a byte stream into TLV frames (see the module docstring)."""

    __slots__ = (
        "_buf",
        "_end",
        "_large",
        "_own",
        "_own_filled",
        "_skip",
        "_start",
        "_view",
        "error",
        "max_frame",
        "own_above",
        "skip_oversize",
        "skipped",
        "types",
    )

    def __init__(
        self,
        max_frame: int,
        *,
        types: frozenset[int] | None = None,
        skip_oversize: bool = False,
        capacity: int = DEFAULT_CAPACITY,
        own_above: int = DEFAULT_OWN_ABOVE,
    ) -> None:
        if not 0 < own_above <= capacity // 2 or capacity < 2 * MIN_READ:
            # a frame that gets no buffer of its own must fit the shared one with room to spare
            raise ValueError("own_above must be positive and at most half the capacity")
        self.max_frame = max_frame
        # accepted first octets (every NDN packet type is one octet); None: any TLV-TYPE
        self.types = types
        self.skip_oversize = skip_oversize
        self.own_above = own_above
        self.error: str | None = None
        self.skipped = 0
        self._buf = bytearray(capacity)
        self._view = memoryview(self._buf)
        self._start = 0  # first octet not yet cut into a frame
        self._end = 0  # octets of the shared buffer filled
        # the large frame being read, into the first ``_own`` octets of ``_large``: a second
        # buffer kept for large frames (grown to the largest seen), so that neither it nor the
        # pages under it are allocated, zeroed and faulted in again for every large frame
        self._large = bytearray(0)
        self._own = 0
        self._own_filled = 0
        self._skip = 0  # octets of a skipped oversized frame still to discard

    @property
    def buffered(self) -> int:
        """Octets of a frame begun and not finished (a truncated frame if the stream ends)."""
        return self._end - self._start + self._own_filled

    # ---- input ---------------------------------------------------------------------------

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next read may write: the rest of a large frame, else the shared buffer's
        free end (moving a partial frame to its start first when the end is full)."""
        own = self._own
        if own:
            return memoryview(self._large)[self._own_filled : own]
        start, end = self._start, self._end
        if start and len(self._buf) - end < MIN_READ:
            # a partial frame (at most own_above octets) moves to the front, through a copy:
            # the two ranges may overlap
            self._buf[: end - start] = bytes(self._view[start:end])
            self._start, self._end = 0, end - start
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[bytes]:
        """``nbytes`` were written where :meth:`get_buffer` pointed: the frames now complete."""
        own = self._own
        if not own:
            self._end += nbytes
            return self._cut()
        self._own_filled += nbytes
        if self._own_filled < own:
            return []
        self._own = self._own_filled = 0
        return [bytes(memoryview(self._large)[:own])]

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Copy ``data`` in and return the frames it completes."""
        frames: list[bytes] = []
        src = memoryview(data)
        off, end = 0, len(src)
        while off < end and self.error is None:
            dst = self.get_buffer(end - off)
            n = min(len(dst), end - off)
            dst[:n] = src[off : off + n]
            off += n
            frames += self.buffer_updated(n)
        return frames

    # ---- framing -------------------------------------------------------------------------

    def _cut(self) -> list[bytes]:
        frames: list[bytes] = []
        if self.error is not None:
            self._start = self._end = 0
            return frames
        buf, view = self._buf, self._view
        start, end = self._start, self._end
        if self._skip:
            n = min(self._skip, end - start)
            self._skip -= n
            start += n
        types = self.types
        while start < end:
            if types is not None and buf[start] not in types:
                self._broken("unknown_type")
                return frames
            try:
                size = frame_length(buf, start, end)
            except DecodeError:
                self._broken("bad_tlv")
                return frames
            if size is None:
                break
            if size > self.max_frame:
                if not self.skip_oversize:
                    self._broken("oversize")
                    return frames
                self.skipped += 1
                n = min(size, end - start)
                self._skip = size - n
                start += n
                continue
            if size <= end - start:
                frames.append(bytes(view[start : start + size]))
                start += size
                continue
            if size > self.own_above:
                # read the rest of this frame once, straight into the large-frame buffer
                if len(self._large) < size:
                    self._large = bytearray(size)
                have = end - start
                self._large[:have] = view[start:end]
                self._own, self._own_filled = size, have
                start = end
            break
        if start == end:
            start = end = 0  # an empty buffer starts over at its beginning
        self._start, self._end = start, end
        return frames

    def _broken(self, reason: str) -> None:
        self.error = reason
        self._start = self._end = 0
        self._own = self._own_filled = 0
