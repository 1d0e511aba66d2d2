"""Memory files shared by the processes of one host and one user: the path of docs/design.md
section 4 for large payloads that stay on the host.

An owner creates a memory file (``memfd``) that begins with a magic and a 16-octet random
token; a peer opens it as ``/proc/<pid>/fd/<fd>``, which the kernel allows only to processes
that may read the owner's memory anyway (the same user, or root).  Before mapping, a peer
checks that the path is a memory file (``/memfd:...``, a regular file, opened without
blocking: a reference may name any fd of a local process), that its size is sealed (an owner
cannot shrink it under a peer's mapping: touching a page past the end would kill the peer with
SIGBUS), and after mapping, that it holds the magic and the token the reference gave.  So a
reused pid or fd, a forged reference or a reference to some other open file is refused, and
nothing but a memory file made for this purpose is ever read or written.

The collective's chunks (``compute/collective/shared.py``) and named-function calls in a
session (``compute/rmi/local.py``) keep their own layouts in such files; this module holds
what they share: making, opening and keeping files mapped.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import mmap
import os
import secrets
import stat
from collections import OrderedDict

from icn.errors import IcnError

TOKEN_LEN = 16
MAGIC_LEN = 8
HEAD = MAGIC_LEN + TOKEN_LEN  # a layout's own header fields start here
# peers' files kept mapped by one reader, least recently used closed first: a mapping keeps its
# file's memory alive after its owner has closed it (a peer gone, a file outgrown)
MAX_MAPS = 64
# sealed by the owner once sized: neither end can change it while the other maps it
SIZE_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW


class MemFileError(IcnError):
    """A memory file cannot be made, opened or used; the message says why."""


class NotReferred(MemFileError):
    """A memory file of the right kind, but another one than a reference names (its token
    differs: a reused pid or fd, or a forged reference)."""


class MemFile:
    """A memory file this process owns: ``size`` octets mapped read-write, the magic and a
    fresh token written at its start."""

    def __init__(self, name: str, size: int, magic: bytes) -> None:
        if len(magic) != MAGIC_LEN:
            raise ValueError(f"a memory file's magic is {MAGIC_LEN} octets")
        self.token = secrets.token_bytes(TOKEN_LEN)
        self.size = size
        # CLOEXEC: /proc/<pid>/fd works without inheriting, and children should not hold it
        flags = os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
        self.fd = os.memfd_create(name[:200], flags)  # the kernel takes 249 octets
        try:
            os.ftruncate(self.fd, size)  # sparse: pages are allocated once written
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, SIZE_SEALS | fcntl.F_SEAL_SEAL)
            self.map = mmap.mmap(self.fd, size)
        except OSError as exc:
            os.close(self.fd)
            raise MemFileError(f"cannot make a memory file of {size} octets: {exc}") from None
        self.map[:MAGIC_LEN] = magic
        self.map[MAGIC_LEN:HEAD] = self.token

    @property
    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        with contextlib.suppress(BufferError):  # a view is still held: unmapped when freed
            self.map.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


class PeerFile:
    """Another process's memory file, mapped (read-only unless ``writable``)."""

    def __init__(self, pid: int, fd: int, magic: bytes, *, writable: bool = False) -> None:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            target = os.readlink(path)
            if not target.startswith("/memfd:") or not stat.S_ISREG(os.stat(path).st_mode):
                raise MemFileError("not a memory file")
            flags = (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC | os.O_NONBLOCK
            fd_here = os.open(path, flags)
        except OSError as exc:
            raise MemFileError(f"{path}: {exc.strerror or exc}") from None
        except MemFileError as exc:
            raise MemFileError(f"{path}: {exc}") from None
        try:
            info = os.fstat(fd_here)
            if not stat.S_ISREG(info.st_mode) or info.st_size < HEAD:
                raise MemFileError(f"{path}: not a memory file of this kind")
            if fcntl.fcntl(fd_here, fcntl.F_GET_SEALS) & SIZE_SEALS != SIZE_SEALS:
                raise MemFileError(f"{path}: a memory file whose size is not sealed")
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
            self.map = mmap.mmap(fd_here, info.st_size, prot=prot)
        except OSError as exc:
            raise MemFileError(f"{path}: {exc.strerror or exc}") from None
        finally:
            os.close(fd_here)
        if self.map[:MAGIC_LEN] != magic:
            self.map.close()
            raise MemFileError(f"{path}: not a memory file of this kind")
        self.token = bytes(self.map[MAGIC_LEN:HEAD])
        self.writable = writable
        # what a layout keeps of the file (views of its header, say): dropped on close, so
        # the mapping can go
        self.layout: object | None = None

    def close(self) -> None:
        self.layout = None
        with contextlib.suppress(BufferError):  # a view is still held: unmapped when freed
            self.map.close()


class PeerFiles:
    """A process's mappings of its peers' memory files of one kind (``magic``): at most
    ``limit``, least recently used closed first.  ``opened`` is called on each new mapping (a
    layout reads its header there)."""

    def __init__(self, magic: bytes, *, writable: bool = False, limit: int = MAX_MAPS) -> None:
        self.magic = magic
        self.writable = writable
        self.limit = limit
        self._maps: OrderedDict[tuple[int, int], PeerFile] = OrderedDict()

    def get(self, pid: int, fd: int, token: bytes) -> PeerFile:
        """The file ``fd`` of ``pid`` whose token is ``token``, mapped; MemFileError (saying
        why) when it cannot be opened or is another file."""
        key = (pid, fd)
        mapped = self._maps.get(key)
        if mapped is not None and mapped.token == token:
            self._maps.move_to_end(key)
            return mapped
        if mapped is not None:  # the pid or fd was reused: that file is another one now
            del self._maps[key]
            mapped.close()
        mapped = PeerFile(pid, fd, self.magic, writable=self.writable)
        if mapped.token != token:
            mapped.close()
            raise NotReferred(f"/proc/{pid}/fd/{fd}: a memory file, but not the one referred to")
        self._maps[key] = mapped
        if len(self._maps) > self.limit:
            _, oldest = self._maps.popitem(last=False)
            oldest.close()
        return mapped

    def known(self, pid: int, fd: int, token: bytes) -> PeerFile | None:
        """The file if it is mapped now (and still the one with ``token``), else None."""
        mapped = self._maps.get((pid, fd))
        return mapped if mapped is not None and mapped.token == token else None

    def close(self) -> None:
        for mapped in self._maps.values():
            mapped.close()
        self._maps.clear()


@functools.cache
def boot_id() -> bytes:
    """This host's boot id (random per boot, readable by every local process, never sent
    anywhere by this project): what two processes compare, under a key they share, to prove
    they run on one host before either names a memory file to the other."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            return f.read().strip()
    except OSError:
        return b""
