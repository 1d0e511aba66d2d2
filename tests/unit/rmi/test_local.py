"""The memory file of a session's calls on one host (compute/rmi/local.py), both ends in this
process: what the server refuses before it opens or reads anything, and the stamps that make a
slot overwritten under its reader an error rather than a wrong answer."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from compute.rmi.errors import BadArguments, NotLocal, ProtocolError
from compute.rmi.local import LocalFile, LocalFiles
from icn.security.hmac_signer import HmacSigner

SIGNER = HmacSigner(b"k" * 32, b"\x08\x02_s")


@pytest.fixture
def ends() -> Iterator[tuple[LocalFile, LocalFiles]]:
    caller = LocalFile(SIGNER, slots=4, args_cap=1 << 16, answer_cap=1 << 16)
    server = LocalFiles()
    yield caller, server
    server.close()
    caller.close()


def take(caller: LocalFile) -> int:
    slot = caller.take()
    assert slot is not None
    return slot


def test_arguments_and_answer_travel_through_the_slot(ends: tuple[LocalFile, LocalFiles]) -> None:
    caller, server = ends
    slot = take(caller)
    blob = os.urandom(50_000)
    ref = caller.put_args(slot, blob)
    seen = server.slot(ref, SIGNER, "/svc/f")
    view = seen.args()
    assert bytes(view) == blob
    view.release()
    answer = os.urandom(60_000)
    assert seen.put_answer(answer, seq=7)
    assert caller.answer(slot, 7, len(answer), "/svc/f") == answer
    # an answer larger than the slot is not written (it rides in the Data instead)
    assert not seen.put_answer(b"x" * ((1 << 16) + 1), seq=8)


def test_a_caller_without_the_hosts_tag_is_refused_before_its_file_is_opened(
    ends: tuple[LocalFile, LocalFiles],
) -> None:
    caller, server = ends
    slot = take(caller)
    ref = caller.put_args(slot, b"a" * 5000)
    ref[3] = bytes(16)  # not the HMAC of this host's boot id under the session's key
    with pytest.raises(NotLocal, match="not on this server's host"):
        server.slot(ref, SIGNER, "/svc/f")
    other = HmacSigner(b"o" * 32, b"\x08\x02_s")  # another session's key: another tag
    with pytest.raises(NotLocal):
        server.slot(caller.put_args(slot, b"a" * 5000), other, "/svc/f")
    assert not server._files._maps  # nothing was opened


def test_references_to_other_files_are_refused(ends: tuple[LocalFile, LocalFiles]) -> None:
    caller, server = ends
    good = caller.slot_ref(0)
    with pytest.raises(NotLocal, match="not the one referred to"):  # a forged token
        server.slot([*good[:2], bytes(16), *good[3:]], SIGNER, "/svc/f")
    # a regular file, not a memory file
    with tempfile.TemporaryFile() as f, pytest.raises(NotLocal, match="not a memory file"):
        server.slot([good[0], f.fileno(), *good[2:]], SIGNER, "/svc/f")
    r, w = os.pipe()  # a FIFO: never opened (it would block)
    try:
        with pytest.raises(NotLocal, match="not a memory file"):
            server.slot([good[0], r, *good[2:]], SIGNER, "/svc/f")
    finally:
        os.close(r)
        os.close(w)
    with pytest.raises(NotLocal):  # no such process
        server.slot([2**22 + 1, *good[1:]], SIGNER, "/svc/f")


@pytest.mark.parametrize(
    "bad",
    [
        "not a list",
        [1, 2, 3],
        [-1, 3, bytes(16), bytes(16), 0, 0],
        [1, 3, "token", bytes(16), 0, 0],
        [1, 3, bytes(16), bytes(16), 0, True],
    ],
)
def test_a_malformed_reference_is_bad_arguments(
    ends: tuple[LocalFile, LocalFiles], bad: object
) -> None:
    _, server = ends
    with pytest.raises(BadArguments):
        server.slot(bad, SIGNER, "/svc/f")


def test_a_reference_out_of_the_file_is_bad_arguments(ends: tuple[LocalFile, LocalFiles]) -> None:
    caller, server = ends
    ref = caller.slot_ref(0)
    with pytest.raises(BadArguments, match="out of its file"):
        server.slot([*ref[:4], 4, 0], SIGNER, "/svc/f")  # slots 0-3
    with pytest.raises(BadArguments, match="out of its file"):
        server.slot([*ref[:5], (1 << 16) + 1], SIGNER, "/svc/f")  # more than a slot holds


def test_an_answer_overwritten_under_its_reader_is_an_error_not_a_wrong_result(
    ends: tuple[LocalFile, LocalFiles],
) -> None:
    caller, server = ends
    slot = take(caller)
    seen = server.slot(caller.slot_ref(slot), SIGNER, "/svc/f")
    assert seen.put_answer(b"A" * 5000, seq=1)
    with pytest.raises(ProtocolError, match="does not hold this call's answer"):
        caller.answer(slot, 2, 5000, "/svc/f")  # call 2 reads what call 1 left
    # a late answer of an earlier call lands in the slot after this call's answer
    assert seen.put_answer(b"B" * 5000, seq=2)
    assert seen.put_answer(b"A" * 5000, seq=1)
    with pytest.raises(ProtocolError):
        caller.answer(slot, 2, 5000, "/svc/f")
    with pytest.raises(ProtocolError, match="does not fit"):
        caller.answer(slot, 1, (1 << 16) + 1, "/svc/f")


def test_a_slot_whose_call_ended_unanswered_is_never_taken_again() -> None:
    caller = LocalFile(SIGNER, slots=4, args_cap=4096, answer_cap=4096)
    taken = [caller.take() for _ in range(4)]
    assert None not in taken and caller.take() is None  # every slot in use
    caller.give_back(taken[0], answered=True)
    caller.give_back(taken[1], answered=False)  # timed out: a late answer may still land
    assert caller.usable()
    assert caller.take() == taken[0]
    caller.give_back(taken[2], answered=False)
    assert not caller.usable()  # half retired: the session makes a new file
    caller.retire()
    assert not caller.file.map.closed  # two calls still hold their slots
    caller.give_back(taken[0], answered=True)
    caller.give_back(taken[3], answered=True)
    assert caller.file.map.closed
