"""link/shape and the link/list dataset: change a face's link emulation while the daemon runs.

An icn extension that NFD does not have: a scenario emulates its links by shaping faces
(:mod:`forwarder.face.shaper`) and changes them during a run, e.g. "cut the link" (loss 1) or
"add 10% loss".  Served under ``/localhost`` only, like every module but rib.

``link/shape`` is a signed command like the others.  Its ControlParameters carry FaceId
(required; 0 means the face the command came on) and the LinkShape element of
:mod:`icn.dataplane.mgmt_ext`: a JSON object with the fields of a face's ``shaper:`` config block,
``{"delay_ms": 10, "jitter_ms": 2, "loss": 0.05, "rate_mbps": 10, "seed": 1}``; absent fields
are 0 (``rate_mbps``: unlimited).  Settings with no delay, jitter, loss nor rate remove shaping;
others replace the face's shaper (packets waiting in the old one are dropped, as on a
reconfigured link).  Answers: 200 with FaceId; 400 for a missing FaceId or LinkShape, a bad value
(the text names the field) or the management face; 404 for a face that does not exist.

``link/list`` is a JSON array with one object per shaped face, whether shaped by command or by
the config file, and per face shaped before whose shapers dropped packets (listed unshaped:
zeros): ``face_id``, ``delay_ms``, ``jitter_ms``, ``loss``, ``rate_mbps`` (null when unlimited)
and ``dropped`` (packets its shapers dropped, lost, over the queue or waiting when replaced,
since the face was created: a cut's drops stay counted after the restore).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from forwarder.face.link_settings import ShaperConfig
from forwarder.mgmt.context import Managed, target_face
from forwarder.mgmt.control import BAD_PARAMS, NOT_FOUND, ControlError
from forwarder.mgmt.dispatcher import Dispatcher
from forwarder.mgmt.mgmt_face import MGMT_FACE_ID
from forwarder.schema import SchemaError, field_names, fill
from icn.errors import ConfigError

if TYPE_CHECKING:
    from ndn.app_support.nfd_mgmt import ControlParametersValue

_FIELDS = ", ".join(field_names(ShaperConfig))


def parse_settings(raw: bytes) -> ShaperConfig:
    """The LinkShape JSON as shaper settings; ControlError(400) naming the field otherwise."""
    try:
        data = json.loads(raw)
    except ValueError as exc:  # not JSON, or not UTF-8
        raise ControlError(BAD_PARAMS, f"LinkShape is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ControlError(BAD_PARAMS, f"LinkShape must be a JSON object with fields {_FIELDS}")
    try:
        # strict: a JSON command says what it means, "10ms" or 1.5 packets are refused
        return fill(ShaperConfig, data, strict=True)
    except SchemaError as exc:
        raise ControlError(BAD_PARAMS, _describe(exc)) from None


def _describe(exc: SchemaError) -> str:
    problems = []
    for p in exc.problems:
        if p.kind == "unknown":
            problems.append(f"LinkShape.{p.where}: unknown field; use {_FIELDS}")
        else:
            problems.append(f"LinkShape.{p.where}: {p.msg} (got {p.value!r})")
    return "; ".join(problems)


def _shape_params_model() -> Any:
    """The model of link/shape's ControlParameters, imported when such a command arrives."""
    from icn.dataplane.mgmt_ext import LinkShapeCommandParameters

    return LinkShapeCommandParameters


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 9)


def install(dispatcher: Dispatcher, ctx: Managed) -> None:
    def shape(params: ControlParametersValue, requester: int) -> ControlParametersValue:
        from ndn.app_support.nfd_mgmt import ControlParametersValue

        if params.face_id is None:
            raise ControlError(BAD_PARAMS, "link/shape needs a FaceId (0: the requesting face)")
        if params.link_shape is None:
            raise ControlError(BAD_PARAMS, "link/shape needs a LinkShape element (JSON settings)")
        settings = parse_settings(bytes(params.link_shape))
        face_id = target_face(params, requester)
        if face_id == MGMT_FACE_ID:
            raise ControlError(BAD_PARAMS, "the management face cannot be shaped")
        face = ctx.faces.get(face_id)
        if face is None:
            raise ControlError(NOT_FOUND, f"face {face_id} does not exist")
        try:
            face.set_shaper(settings.face_shaper())
        except ConfigError as exc:  # the face shaper's own checks; the model should catch all
            raise ControlError(BAD_PARAMS, f"LinkShape: {exc}") from None
        ctx.counters["mgmt.link_shape"] += 1
        body = ControlParametersValue()
        body.face_id = face_id
        return body

    def listing(_requester: int, _extra: list[bytes]) -> bytes:
        rows: list[dict[str, Any]] = []
        for face in ctx.faces:
            shaper = face.shaper
            dropped = face.shaper_dropped
            if shaper is None and not dropped:
                continue
            row: dict[str, Any] = {
                "face_id": face.face_id,
                "delay_ms": 0.0,
                "jitter_ms": 0.0,
                "loss": 0.0,
                "rate_mbps": None,
                "dropped": dropped,
            }
            if shaper is not None:
                cfg = shaper.config
                row["delay_ms"], row["jitter_ms"] = _ms(cfg.delay), _ms(cfg.jitter)
                row["loss"] = cfg.loss
                row["rate_mbps"] = None if cfg.rate is None else round(cfg.rate / 1e6, 9)
            rows.append(row)
        return json.dumps(rows).encode()

    dispatcher.add_command("link", "shape", shape, load_params=_shape_params_model)
    dispatcher.add_dataset("link", "list", listing)
