"""The forwarder: NFD's pipelines over the tables, sans-IO.

Faces hand packets in through the :class:`~forwarder.face_api.PacketSink` methods and the
pipelines answer by calling :class:`~forwarder.face_api.FaceLike` send methods; time comes from
one injected clock, and the daemon calls :meth:`Forwarder.tick` every 10-50 ms.  Each incoming
pipeline lives in its own module, one class on the other in a single line (``reflexive``, then
``nack_pipeline``, ``data_pipeline``, ``interest_pipeline``, then this class), not mixed in
side by side: mypyc compiles these modules (pyproject.toml ``[tool.icn] compiled``) and its
classes take one base.  The tables and the outgoing pipelines are in ``forwarder_base``, the
reflexive forwarding rules the Interest and Data pipelines apply in ``reflexive``.

Every drop and every pipeline action counts under "fw.<event>" in the shared counter bag.  Bad
input from the network is dropped and counted, never raised: a face calls in from its read
callback and an exception there would kill the connection.
"""

from __future__ import annotations

from forwarder.face_api import FaceLike
from forwarder.fw.interest_pipeline import InterestPipeline
from forwarder.fw.strategy import watcher_of
from forwarder.table.fib import prefix_depth
from icn.errors import ConfigError, DecodeError


class Forwarder(InterestPipeline):
    """One forwarding engine (implements ``PacketSink``).

    ``Forwarder(limits, counters, clock, default_strategy)``: see ``ForwarderBase``.
    """

    # -- faces ---------------------------------------------------------------------------------

    def add_face(self, face: FaceLike) -> None:
        self.faces[face.face_id] = face

    def remove_face(self, face_id: int) -> None:
        """Forget the face, its PIT in/out-records and its FIB next hops.  PIT entries left with
        no downstream are erased by the PIT (nobody is waiting for their Data), without
        finalize: reflexive states whose TI went with them are dropped here instead."""
        self.faces.pop(face_id, None)
        self.refused_by_face.pop(face_id, None)
        if self.pit.remove_face(face_id) and len(self.rft):
            self.rft.prune()
        self.fib.remove_face(face_id)

    # -- strategy choice -----------------------------------------------------------------------

    def set_strategy(self, prefix: bytes, name: str) -> None:
        """Choose strategy ``name`` (with its parameters, if any) for names under ``prefix``;
        ConfigError for an unknown name (listing the known ones), a bad parameter, a malformed
        prefix or a full strategy choice table."""
        try:
            prefix_depth(prefix)
        except DecodeError as exc:
            raise ConfigError(
                f"strategy prefix {prefix.hex()} is not a valid name: {exc}"
            ) from None
        strategy = self._strategy_instance(name)
        ok = self.strategy_choice.set(prefix, strategy)
        self._drop_unchosen_strategies()
        if not ok:
            raise ConfigError(
                f"strategy choice table full ({self.strategy_choice.max_entries} prefixes): "
                "unset a choice or raise tables.strategy_choice_max_entries"
            )

    def unset_strategy(self, prefix: bytes) -> bool:
        """Let ``prefix`` inherit its parent's strategy; False if it had no choice (or is /)."""
        if not self.strategy_choice.unset(prefix):
            return False
        self._drop_unchosen_strategies()
        return True

    def _drop_unchosen_strategies(self) -> None:
        # An instance no prefix chooses any more goes, with what it measured (NFD ends a
        # strategy with its choice), so instances stay bounded by the strategy choice table.
        # Entries it still watches keep it alive until they end.
        chosen = {id(strategy) for _, strategy in self.strategy_choice}
        for full, strategy in list(self._strategies.items()):
            if id(strategy) not in chosen:
                del self._strategies[full]

    # -- timers --------------------------------------------------------------------------------

    def tick(self) -> None:
        """Finalize every PIT entry whose expiry has passed (NFD's Interest finalize), telling
        the strategy that watches one; then run the strategies' own timers.  Expired
        Interests get no Nack: their downstreams have timed out too."""
        now = self.clock()
        finalize = self.finalize
        faces = self.faces
        for entry in self.pit.expire(now):
            # each downstream still waiting timed out (ndnSIM's per-face TimedOutInterests)
            # (off the packet path; the daemon's faces carry FaceStats, a test's fakes may not)
            for face_id in entry.in_records:
                stats = getattr(faces.get(face_id), "stats", None)
                if stats is not None:
                    stats.n_timed_out_interests += 1
            watcher = watcher_of(entry)
            if watcher is not None:
                watcher.on_interest_expired(entry, now)
            finalize(entry, now)
        for strategy in self._strategies.values():
            strategy.tick(now)
