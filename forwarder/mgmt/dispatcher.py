"""The management dispatcher: ``/localhost/nfd/<module>/<verb>`` to a handler, and its answer.

It sits behind the internal management face (:mod:`forwarder.mgmt.mgmt_face`), reached through
the FIB like any producer, so PIT, scope rules (``/localhost`` only from local faces) and
counters apply to management traffic as to any other.

A *command* is a signed Interest carrying ControlParameters; it is validated (signature form,
time window, replay) before its handler runs, and always answered with a ControlResponse Data
named exactly as the command, unless it cannot be parsed at all (NFD drops those silently).  A
*dataset* is answered with versioned segments (:mod:`forwarder.mgmt.dataset`); it needs no
signature.  Unknown modules and verbs get 501 so tools fail fast instead of timing out.

What is accepted from where (as NFD): ``/localhost/nfd`` only from local faces (the pipeline
drops it from others before it gets here; the dispatcher checks again); ``/localhop/nfd/rib``
from a non-local face only when the forwarder has a trust policy for it (``localhop``, else 403:
without one any host that reaches a UDP port could pull any prefix to itself), from a local face
as a local command; and a DigestSha256 "signature", which names no signer and needs no key,
never from a non-local face.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from forwarder.fw.forwarder_base import LOCALHOP, LOCALHOST
from forwarder.mgmt.command_auth import (
    DIGEST_KEY_NAME,
    CommandRejected,
    CommandValidator,
    SignedCommand,
    parse_command,
)
from forwarder.mgmt.control import (
    INTERNAL,
    NOT_IMPLEMENTED,
    OK,
    UNAUTHORIZED,
    ControlError,
    decode_params,
    encode_response,
)
from forwarder.mgmt.dataset import DatasetStore, is_versioned
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.encode import make_data
from icn.wire.name import generic
from icn.wire.packet import InterestView
from icn.wire.tlv import read_tl

if TYPE_CHECKING:
    from ndn.app_support.nfd_mgmt import ControlParametersValue

log = logging.getLogger(__name__)

NFD = b"\x08\x03nfd"
RESPONSE_FRESHNESS_MS = 1000

# Strings: python-ndn's models are imported when a command arrives (forwarder.mgmt.control).
CommandResult: TypeAlias = "ControlParametersValue | Awaitable[ControlParametersValue]"
# handler(params, requester face id) -> response body (or an awaitable of it); raises ControlError
CommandHandler: TypeAlias = Callable[["ControlParametersValue", int], CommandResult]
# dataset(requester face id, extra name components after the verb) -> content bytes
DatasetHandler: TypeAlias = Callable[[int, list[bytes]], bytes]
# what the dispatcher answers through: (Data wire) -> None
Reply: TypeAlias = Callable[[bytes], None]
# checks a /localhop command's signer against the forwarder's trust policy: (Interest, the
# parsed command, the requesting face) -> None when accepted (or an awaitable of it); raises
# CommandRejected
LocalhopPolicy: TypeAlias = Callable[[InterestView, "SignedCommand", int], "Awaitable[None] | None"]


class Dispatcher:
    """Routes management Interests to command and dataset handlers and sends their answers."""

    def __init__(
        self,
        reply: Reply,
        *,
        validator: CommandValidator | None = None,
        counters: Counter[str] | None = None,
        store: DatasetStore | None = None,
        face_is_local: Callable[[int], bool] = lambda face: True,
        localhop: LocalhopPolicy | None = None,
    ) -> None:
        self.reply = reply
        self.face_is_local = face_is_local
        self.localhop = localhop
        self.counters: Counter[str] = Counter() if counters is None else counters
        self.validator = validator or CommandValidator(counters=self.counters)
        self.store = store or DatasetStore()
        self.commands: dict[tuple[bytes, bytes], CommandHandler] = {}
        self.datasets: dict[tuple[bytes, bytes], DatasetHandler] = {}
        # loaders of the python-ndn model of the ControlParameters of commands that carry
        # extension fields
        self.param_models: dict[tuple[bytes, bytes], Callable[[], Any]] = {}
        self.localhop_modules: set[bytes] = {b"rib"}
        self._tasks: set[asyncio.Task[None]] = set()

    def add_command(
        self,
        module: str,
        verb: str,
        handler: CommandHandler,
        load_params: Callable[[], Any] | None = None,
    ) -> None:
        """``load_params``: for a command whose parameters extend NFD's, a function returning
        the python-ndn model of its whole ControlParameters element (see
        :func:`decode_params`), called when such a command arrives so that the models are
        imported only once management is used."""
        key = (module.encode(), verb.encode())
        self.commands[key] = handler
        if load_params is not None:
            self.param_models[key] = load_params

    def add_dataset(self, module: str, verb: str, handler: DatasetHandler) -> None:
        self.datasets[(module.encode(), verb.encode())] = handler

    # -- incoming ------------------------------------------------------------------------------

    def handle(self, iv: InterestView, requester: int) -> None:
        """One management Interest from face ``requester``.  Never raises."""
        c = self.counters
        c["mgmt.in_interest"] += 1
        name, ends = iv.name, iv.name_ends
        comps = [name[(ends[i - 1] if i else 0) : ends[i]] for i in range(min(len(ends), 4))]
        if len(comps) < 4 or comps[1] != NFD:
            c["mgmt.drop_not_management"] += 1
            return
        module, verb = _value(comps[2]), _value(comps[3])
        local = self.face_is_local(requester)
        if comps[0] == LOCALHOST and not local:
            c["mgmt.drop_localhost_nonlocal"] += 1  # (the pipeline's scope rule drops it first)
            return
        localhop = comps[0] == LOCALHOP
        if localhop and module not in self.localhop_modules:
            self._respond(iv, NOT_IMPLEMENTED, "only rib commands are served under /localhop")
            return
        # a face the forwarder deems local (Unix, memory, an IP peer in local_networks) may
        # send /localhost commands anyway: its /localhop ones get the same trust (an app whose
        # transport is an IP address it cannot tell is local sends /localhop, as python-ndn)
        policed = localhop and not local
        if policed and self.localhop is None and (module, verb) in self.commands:
            c["mgmt.refused_localhop_no_policy"] += 1
            self._respond(
                iv,
                UNAUTHORIZED,
                "/localhop commands are refused: this forwarder has no trust policy for them "
                "(config localhop_security); local apps use /localhost/nfd",
            )
            return
        if (module, verb) in self.datasets:
            self._dataset(iv, module, verb, requester)
            return
        handler = self.commands.get((module, verb))
        if handler is None:
            c["mgmt.unknown_command"] += 1
            what = module.decode(errors="replace") + "/" + verb.decode(errors="replace")
            self._respond(iv, NOT_IMPLEMENTED, f"unknown management command {what}")
            return
        try:
            cmd = parse_command(iv.wire)
        except DecodeError:
            c["mgmt.drop_malformed_command"] += 1
            return
        except CommandRejected as exc:
            c["mgmt.rejected_signature"] += 1
            self._respond(iv, exc.status, exc.text)
            return
        if cmd.key_name == DIGEST_KEY_NAME and not local:
            c["mgmt.refused_digest_nonlocal"] += 1
            self._respond(
                iv,
                UNAUTHORIZED,
                "a DigestSha256 command names no signer: accepted from local faces only",
            )
            return
        # A digest "signature" names no signer, so every local app shares its key and its
        # times only increase per app: order them per requesting face.  Nonces stay per key,
        # so a command replayed from another face is still caught.
        scope = generic(f"face={requester}") if cmd.key_name == DIGEST_KEY_NAME else b""
        try:
            self.validator.check(cmd, scope)
            load_params = self.param_models.get((module, verb))
            params = decode_params(cmd.params, None if load_params is None else load_params())
            checked = (
                self.localhop(iv, cmd, requester) if policed and self.localhop is not None else None
            )
        except CommandRejected as exc:
            self._respond(iv, exc.status, exc.text)
            return
        except ControlError as exc:
            c["mgmt.bad_params"] += 1
            self._respond(iv, exc.status, exc.text, exc.body)
            return
        if checked is None:
            self._run(iv, handler, params, requester)
            return
        task = asyncio.ensure_future(self._run_checked(iv, checked, handler, params, requester))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_checked(
        self,
        iv: InterestView,
        checked: Awaitable[None],
        handler: CommandHandler,
        params: ControlParametersValue,
        face: int,
    ) -> None:
        """Run a command once its signer's certificate chain is checked (it may be fetched)."""
        try:
            await checked
        except CommandRejected as exc:
            self._respond(iv, exc.status, exc.text)
            return
        self._run(iv, handler, params, face)

    def _run(
        self, iv: InterestView, handler: CommandHandler, params: ControlParametersValue, face: int
    ) -> None:
        from ndn.app_support.nfd_mgmt import ControlParametersValue

        try:
            result = handler(params, face)
        except ControlError as exc:
            self.counters[f"mgmt.status_{exc.status}"] += 1
            self._respond(iv, exc.status, exc.text, exc.body)
            return
        except Exception:  # a bug in a handler must not take the daemon down
            self.counters["mgmt.handler_error"] += 1
            log.exception("management handler failed")
            self._respond(iv, INTERNAL, "internal error")
            return
        if isinstance(result, ControlParametersValue):
            self.counters["mgmt.status_200"] += 1
            self._respond(iv, OK, "OK", result)
            return
        task = asyncio.ensure_future(self._finish(iv, result))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, iv: InterestView, pending: Awaitable[ControlParametersValue]) -> None:
        try:
            body = await pending
        except ControlError as exc:
            self.counters[f"mgmt.status_{exc.status}"] += 1
            self._respond(iv, exc.status, exc.text, exc.body)
            return
        except Exception:
            self.counters["mgmt.handler_error"] += 1
            log.exception("management handler failed")
            self._respond(iv, INTERNAL, "internal error")
            return
        self.counters["mgmt.status_200"] += 1
        self._respond(iv, OK, "OK", body)

    def _dataset(self, iv: InterestView, module: bytes, verb: bytes, requester: int) -> None:
        c = self.counters
        if is_versioned(iv.name, iv.name_ends, 3):
            # A follow-up for a segment already generated: from the store, else silence (NFD).
            wire = self.store.lookup(iv.name, iv.can_be_prefix)
            if wire is None:
                c["mgmt.dataset_miss"] += 1
                return
            c["mgmt.dataset_segment"] += 1
            self.reply(wire)
            return
        ends = iv.name_ends
        extra = [iv.name[ends[i - 1] : ends[i]] for i in range(4, len(ends))]
        try:
            content = self.datasets[(module, verb)](requester, extra)
        except ControlError as exc:
            self._respond(iv, exc.status, exc.text, exc.body)
            return
        except Exception:
            self.counters["mgmt.handler_error"] += 1
            log.exception("management dataset failed")
            self._respond(iv, INTERNAL, "internal error")
            return
        c["mgmt.dataset"] += 1
        self.reply(self.store.publish(iv.name, content))

    def _respond(
        self,
        iv: InterestView,
        status: int,
        text: str,
        body: ControlParametersValue | None = None,
    ) -> None:
        content = encode_response(status, text, body)
        self.reply(make_data(iv.name, content, freshness=RESPONSE_FRESHNESS_MS))
        self.counters["mgmt.out_response"] += 1

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def _value(component: bytes) -> bytes:
    """A generic component's TLV-VALUE (b"" for any other type: no module is named so)."""
    typ, start, end = read_tl(component, 0, len(component))
    return component[start:end] if typ == T.COMP_GENERIC else b""
