"""``icn status``, ``face``, ``route``, ``strategy`` and ``cs``: an nfdc for our forwarder.

Everything goes through the NFD management protocol (:mod:`icn.dataplane.mgmt_client`), so these
commands
drive NFD itself just as well, and anything they can do a python-ndn app can do too.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Annotated, Any

import typer

from apps.cli.common import (
    EXIT_CODES_HELP,
    EXIT_REFUSED,
    JsonOpt,
    emit,
    fail,
    parse_name,
    print_fields,
    print_table,
    quantity,
    with_endpoint,
    yes_no,
)
from apps.cli.options import PANEL_MANAGEMENT, TransportOpt, duration_option
from icn.dataplane import mgmt_client as mc
from icn.dataplane.endpoint import Endpoint
from icn.errors import CommandFailed

ROUTE_CHILD_INHERIT, ROUTE_CAPTURE = 1, 2
CS_ADMIT, CS_SERVE = 1, 2
ORIGIN_STATIC = 255  # what nfdc uses for routes an operator adds

PrefixArg = Annotated[str, typer.Argument(help="name prefix, e.g. /example")]
FaceArg = Annotated[str, typer.Argument(help="face id, or remote URI such as udp4://10.0.0.2:6363")]


def _sub(help_text: str) -> typer.Typer:
    return typer.Typer(no_args_is_help=True, help=help_text, epilog=EXIT_CODES_HELP)


face_app = _sub("Faces: list, create, destroy and shape (link emulation).")
route_app = _sub("Routes: list the RIB and FIB, add and remove routes.")
strategy_app = _sub(
    "Strategy choice: list, set and unset the strategy of a prefix; show what asf measured."
)
cs_app = _sub("Content store: info, erase entries, change capacity and policy.")


def _canonical(uri: str) -> str:
    """A face URI as the forwarder lists it (udp:// becomes udp4://...); FaceError: exit 2."""
    from forwarder.face.uri import parse_face_uri

    return str(parse_face_uri(uri))


async def _face_id(ep: Endpoint, face: str, action: str, *, create: bool = False) -> int:
    """The id of FACE (an id, or a remote URI looked up in faces/list).  With ``create``, a URI
    without a face gets one by faces/create first, as ``nfdc route add`` does."""
    if face.isdigit():
        return int(face)
    uri = _canonical(face)
    for row in await mc.status(ep, "faces/list"):
        if row.get("uri") == uri:
            return int(row["face_id"])
    if not create:
        fail(f"{action} failed: no face with remote URI {uri}", EXIT_REFUSED)
    body = await mc.command(ep, "faces", "create", uri=uri)
    return int(body["face_id"])


def status(transport: TransportOpt = None, as_json: JsonOpt = False) -> None:
    """Forwarder status: version, uptime, table sizes and packet counters."""
    st = with_endpoint("status", transport, lambda ep: mc.status(ep, "status/general"))
    st["uptime_s"] = round((st["current_timestamp"] - st["start_timestamp"]) / 1000, 3)
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st["start_timestamp"] / 1000))
    head = [("version", st.get("nfd_version")), ("started", started)]
    head.append(("uptime", f"{st['uptime_s']:g} s"))
    counts = [(k[2:].replace("_", " "), v) for k, v in st.items() if k.startswith("n_")]
    emit(as_json, st, lambda: print_fields("General forwarder status", head + counts))


class Persistency(StrEnum):
    persistent = "persistent"
    permanent = "permanent"


@face_app.command("list", epilog=EXIT_CODES_HELP)
def face_list(transport: TransportOpt = None, as_json: JsonOpt = False) -> None:
    """List faces with their URIs, scope, persistency and packet counters."""
    faces = with_endpoint("face list", transport, lambda ep: mc.status(ep, "faces/list"))

    def counts(f: dict[str, Any], way: str) -> str:
        return "/".join(str(f.get(f"n_{way}_{k}", 0)) for k in ("interests", "data", "nacks"))

    rows = [
        (f["face_id"], f.get("uri"), f.get("local_uri"), f.get("face_scope"),
         f.get("face_persistency"), counts(f, "in"), counts(f, "out"))
        for f in faces
    ]  # fmt: skip
    cols = ["id", "remote", "local", "scope", "persistency", "in I/D/N", "out I/D/N"]
    emit(as_json, faces, lambda: print_table(None, cols, rows))


@face_app.command("create", epilog=EXIT_CODES_HELP)
def face_create(
    uri: Annotated[str, typer.Argument(help="remote URI, e.g. udp4://10.0.0.2:6363")],
    persistency: Annotated[
        Persistency, typer.Option(help="persistent or permanent (kept after errors)")
    ] = Persistency.persistent,
    transport: TransportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a UDP or TCP face; a face that already exists is reported, not an error."""
    # Persistent is what faces/create does by default, so the field is sent only for permanent.
    code = 2 if persistency is Persistency.permanent else None

    async def body(ep: Endpoint) -> dict[str, Any]:
        try:
            reply = await mc.command(ep, "faces", "create", uri=uri, face_persistency=code)
            return {"result": "created", **reply}
        except CommandFailed as exc:
            if exc.status != 409:
                raise
        face_id = await _face_id(ep, uri, "face create")  # 409: the face exists; which one?
        return {"result": "exists", "face_id": face_id, "uri": _canonical(uri)}

    out = with_endpoint("face create", transport, body)
    text = f"face {out['result']}: id={out['face_id']} remote={out.get('uri')}"
    if out["result"] == "created":
        text += f" local={out.get('local_uri')} persistency={out.get('face_persistency')}"
    emit(as_json, out, text)


@face_app.command("destroy", epilog=EXIT_CODES_HELP)
def face_destroy(face: FaceArg, transport: TransportOpt = None, as_json: JsonOpt = False) -> None:
    """Destroy a face (its routes go with it)."""

    async def body(ep: Endpoint) -> dict[str, Any]:
        face_id = await _face_id(ep, face, "face destroy")
        if not any(f["face_id"] == face_id for f in await mc.status(ep, "faces/list")):
            fail(f"face destroy failed: face {face_id} does not exist", EXIT_REFUSED)
        return await mc.command(ep, "faces", "destroy", face_id=face_id)

    out = with_endpoint("face destroy", transport, body)
    emit(as_json, out, f"face destroyed: id={out['face_id']}")


def _shaping_text(delay_ms: float, jitter_ms: float, loss: float, rate_mbps: float | None) -> str:
    rate = "unlimited" if rate_mbps is None else f"{rate_mbps:g}Mbit/s"
    return f"delay={delay_ms:g}ms jitter={jitter_ms:g}ms loss={loss * 100:g}% rate={rate}"


@face_app.command("shape", epilog=EXIT_CODES_HELP)
def face_shape(
    face: FaceArg,
    delay: Annotated[float | None, duration_option("--delay", help="one-way delay")] = None,
    jitter: Annotated[
        float | None, duration_option("--jitter", help="the delay varies by +- this")
    ] = None,
    loss: Annotated[str | None, typer.Option(help="drop probability, e.g. 5% or 0.05")] = None,
    rate: Annotated[str | None, typer.Option(help="link rate limit, e.g. 10Mbit")] = None,
    seed: Annotated[int | None, typer.Option(help="seed of the loss and jitter draws")] = None,
    transport: TransportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Emulate a link on FACE's send path (an icn extension, not NFD: link/shape).

    The settings replace the face's shaping; options left out are 0 (rate: unlimited), so with
    none at all shaping is removed.  --loss 100% cuts the link.
    """
    from icn.units import parse_probability, parse_rate

    delay_s = delay or 0.0
    jitter_s = jitter or 0.0
    drop = quantity("--loss", loss, parse_probability) or 0.0
    bps = quantity("--rate", rate, parse_rate)
    settings: dict[str, Any] = {
        "delay_ms": delay_s * 1000.0,
        "jitter_ms": jitter_s * 1000.0,
        "loss": drop,
        "rate_mbps": None if bps is None else bps / 1e6,
        "seed": seed,
    }

    async def body(ep: Endpoint) -> dict[str, Any]:
        face_id = await _face_id(ep, face, "face shape")
        return await mc.shape_face(ep, face_id, **settings)

    out = with_endpoint("face shape", transport, body)
    shaped = bool(drop or delay_s or jitter_s or bps)
    out["shaped"] = shaped
    if shaped:
        text = f"face shaped: id={out['face_id']} " + _shaping_text(
            settings["delay_ms"], settings["jitter_ms"], drop, settings["rate_mbps"]
        )
    else:
        text = f"face unshaped: id={out['face_id']}"
    emit(as_json, out, text)


@face_app.command("shaping", epilog=EXIT_CODES_HELP)
def face_shaping(transport: TransportOpt = None, as_json: JsonOpt = False) -> None:
    """List shaped faces: delay, jitter, loss, rate and packets the shaper dropped (link/list)."""
    links = with_endpoint("face shaping", transport, mc.link_list)
    rows = [
        (r["face_id"], f"{r['delay_ms']:g}", f"{r['jitter_ms']:g}", f"{r['loss'] * 100:g}%",
         "-" if r.get("rate_mbps") is None else f"{r['rate_mbps']:g}", r.get("dropped", 0))
        for r in links
    ]  # fmt: skip
    cols = ["id", "delay ms", "jitter ms", "loss", "rate Mbit/s", "dropped"]
    emit(as_json, links, lambda: print_table(None, cols, rows))


def _route_flags(flags: int) -> str:
    names = {ROUTE_CHILD_INHERIT: "child-inherit", ROUTE_CAPTURE: "capture"}
    return ",".join(n for bit, n in names.items() if flags & bit) or "-"


@route_app.command("list", epilog=EXIT_CODES_HELP)
def route_list(transport: TransportOpt = None, as_json: JsonOpt = False) -> None:
    """List the RIB (routes by origin) and the FIB (next hops the forwarder uses)."""

    async def body(ep: Endpoint) -> dict[str, Any]:
        return {"rib": await mc.status(ep, "rib/list"), "fib": await mc.status(ep, "fib/list")}

    out = with_endpoint("route list", transport, body)
    rib = [
        (e["name"], r["face_id"], r.get("origin", 0), r.get("cost", 0),
         _route_flags(r.get("flags", 0)), r.get("expiration_period", "never"))
        for e in out["rib"]
        for r in e.get("routes", [])
    ]  # fmt: skip
    fib = [
        (e["name"], " ".join(f"{h['face_id']}({h['cost']})" for h in e["next_hop_records"]))
        for e in out["fib"]
    ]

    def tables() -> None:
        print_table("RIB", ["prefix", "face", "origin", "cost", "flags", "expires ms"], rib)
        print_table("FIB", ["prefix", "next hops face(cost)"], fib)

    emit(as_json, out, tables)


@route_app.command("add", epilog=EXIT_CODES_HELP)
def route_add(
    prefix: PrefixArg,
    face: FaceArg,
    cost: Annotated[int, typer.Option(help="route cost (lower is preferred)")] = 0,
    origin: Annotated[int, typer.Option(help="route origin (255 static, 0 app)")] = ORIGIN_STATIC,
    inherit: Annotated[bool, typer.Option(help="CHILD_INHERIT: longer prefixes use it too")] = True,
    capture: Annotated[bool, typer.Option(help="CAPTURE: hide routes of shorter prefixes")] = False,
    expires: Annotated[
        float | None, duration_option("--expires", help="remove the route after this long")
    ] = None,
    transport: TransportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a route (rib/register); a face URI without a face gets one first."""
    flags = (ROUTE_CHILD_INHERIT if inherit else 0) | (ROUTE_CAPTURE if capture else 0)
    expires_ms = None if expires is None else round(expires * 1000)  # NFD's ExpirationPeriod

    async def body(ep: Endpoint) -> dict[str, Any]:
        name = parse_name(prefix)
        face_id = await _face_id(ep, face, "route add", create=True)
        return await mc.command(
            ep,
            "rib",
            "register",
            name=name,
            face_id=face_id,
            cost=cost,
            origin=origin,
            flags=flags,
            expiration_period=expires_ms,
        )

    out = with_endpoint("route add", transport, body)
    flags_text, expiry = _route_flags(out.get("flags", 0)), out.get("expiration_period", "never")
    text = f"route added: {out['name']} -> face {out['face_id']} (origin={out.get('origin')} "
    emit(as_json, out, text + f"cost={out.get('cost')} flags={flags_text} expires={expiry})")


@route_app.command("remove", epilog=EXIT_CODES_HELP)
def route_remove(
    prefix: PrefixArg,
    face: FaceArg,
    origin: Annotated[int, typer.Option(help="origin of the route to remove")] = ORIGIN_STATIC,
    transport: TransportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove the route of PREFIX through FACE with ORIGIN (rib/unregister)."""

    async def body(ep: Endpoint) -> dict[str, Any]:
        name = parse_name(prefix)
        face_id = await _face_id(ep, face, "route remove")
        return await mc.command(ep, "rib", "unregister", name=name, face_id=face_id, origin=origin)

    out = with_endpoint("route remove", transport, body)
    text = f"route removed: {out['name']} -> face {out['face_id']} (origin={out.get('origin')})"
    emit(as_json, out, text)


@strategy_app.command("list", epilog=EXIT_CODES_HELP)
def strategy_list(transport: TransportOpt = None, as_json: JsonOpt = False) -> None:
    """List which strategy each prefix uses."""
    rows = with_endpoint(
        "strategy list", transport, lambda ep: mc.status(ep, "strategy-choice/list")
    )
    table = [(r["name"], r.get("strategy")) for r in rows]
    emit(as_json, rows, lambda: print_table(None, ["prefix", "strategy"], table))


@strategy_app.command("set", epilog=EXIT_CODES_HELP)
def strategy_set(
    prefix: PrefixArg,
    strategy: Annotated[
        str,
        typer.Argument(
            help="best-route, multicast, asf, multipath, or an instance name with parameters "
            "after the version, e.g. /localhost/nfd/strategy/asf/v=5/clone-after~50"
        ),
    ],
    transport: TransportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Make PREFIX (and longer names without their own choice) use STRATEGY."""
    from forwarder.fw.strategy import STRATEGY_PREFIX

    instance = strategy if strategy.startswith("/") else STRATEGY_PREFIX + strategy

    async def body(ep: Endpoint) -> dict[str, Any]:
        name, chosen = parse_name(prefix), parse_name(instance)
        return await mc.command(ep, "strategy-choice", "set", name=name, strategy=chosen)

    out = with_endpoint("strategy set", transport, body)
    emit(as_json, out, f"strategy set: {out['name']} -> {out.get('strategy')}")


def _ms_text(value: float | None) -> str | None:
    return None if value is None else f"{value:g}"


def _show_text(prefix: str, status: dict[str, Any]) -> Callable[[], None]:
    def text() -> None:
        uses = f"{status['prefix']} uses {status['strategy']}"
        namespaces = status["namespaces"]
        if not status["asf"] and not namespaces:
            typer.echo(
                f"{uses}, which keeps no measurements; `icn strategy set {prefix} asf` makes "
                "it adaptive"
            )
            return
        if not namespaces:
            typer.echo(f"{uses}: nothing measured (no Interest since it was chosen, or for 5 min)")
            return
        typer.echo(uses)
        cols = ["face", "cost", "best", "status", "srtt ms", "rttvar ms", "rto ms", "samples",
                "timeouts", "nacks", "congestion", "failures", "last probe ms ago",
                "retry in ms"]  # fmt: skip
        for ns in namespaces:
            clone = ns["clone_after_ms"]
            pct = ns.get("clone_percentile")
            if pct is not None:
                cloning = f"clones after the p{pct} of the hop's RTTs (its RTO under 8 samples)"
            else:
                cloning = "no cloning" if clone is None else f"clones after {clone:g} ms"
            title = (
                f"{ns['prefix']}: probes every {ns['probing_interval_ms']:g} ms (next in "
                f"{ns['next_probe_in_ms']:g}), failed after {ns['max_timeouts']} in a row, "
                + cloning
            )
            rows: list[tuple[Any, ...]] = [
                (
                    h["face_id"],
                    h["cost"],
                    "*" if h["best"] else "",
                    h["status"],
                    _ms_text(h["srtt_ms"]),
                    _ms_text(h["rttvar_ms"]),
                    _ms_text(h["rto_ms"]),
                    h["samples"],
                    h["timeouts"],
                    h["nacks"],
                    h.get("congestion_nacks", 0),
                    h["failures"],
                    _ms_text(h["last_probe_ago_ms"]),
                    _ms_text(h["retry_in_ms"]),
                )
                for h in ns["nexthops"]
            ]
            if pct is not None:  # the percentile in use per hop, or the RTO standing in
                rows = [
                    (*row, f"{_ms_text(h['clone_after_ms'])} ({h['clone_by']})")
                    for row, h in zip(rows, ns["nexthops"], strict=True)
                ]
            print_table(title, [*cols, "clone after ms"] if pct is not None else cols, rows)

    return text


@strategy_app.command("show", epilog=EXIT_CODES_HELP)
def strategy_show(
    prefix: PrefixArg, transport: TransportOpt = None, as_json: JsonOpt = False
) -> None:
    """What the adaptive strategy (asf) measured under PREFIX: per next hop its smoothed RTT,
    RTT variation, RTO, samples, timeouts, Nacks, failures in a row, last probe, and which hop
    new Interests go to (best).  A prefix without asf says which strategy it uses."""
    status = with_endpoint(
        "strategy show", transport, lambda ep: mc.asf_list(ep, parse_name(prefix))
    )
    emit(as_json, status, _show_text(prefix, status))


@strategy_app.command("unset", epilog=EXIT_CODES_HELP)
def strategy_unset(
    prefix: PrefixArg, transport: TransportOpt = None, as_json: JsonOpt = False
) -> None:
    """Remove PREFIX's strategy choice; it inherits its parent's again (not allowed for /)."""

    def body(ep: Endpoint) -> Awaitable[dict[str, Any]]:
        return mc.command(ep, "strategy-choice", "unset", name=parse_name(prefix))

    out = with_endpoint("strategy unset", transport, body)
    emit(as_json, out, f"strategy unset: {out['name']}")


def _cs_view(capacity: int, flags: int) -> dict[str, Any]:
    return {"capacity": capacity, "admit": bool(flags & CS_ADMIT), "serve": bool(flags & CS_SERVE)}


@cs_app.command("info", epilog=EXIT_CODES_HELP)
def cs_info(transport: TransportOpt = None, as_json: JsonOpt = False) -> None:
    """Content store capacity, policy, number of entries, hits and misses."""
    info = with_endpoint("cs info", transport, lambda ep: mc.status(ep, "cs/info"))
    out = {**_cs_view(info["capacity"], info.pop("flags", 0)), **info}
    rows = [(k.removeprefix("n_").replace("_", " "), v) for k, v in out.items()]
    emit(as_json, out, lambda: print_fields("Content store", rows))


@cs_app.command("erase", epilog=EXIT_CODES_HELP)
def cs_erase(
    prefix: PrefixArg,
    count: Annotated[int | None, typer.Option(help="erase at most N entries")] = None,
    transport: TransportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Erase cached Data under PREFIX."""

    def body(ep: Endpoint) -> Awaitable[dict[str, Any]]:
        return mc.command(ep, "cs", "erase", name=parse_name(prefix), count=count)

    out = with_endpoint("cs erase", transport, body)
    more = " (limit reached: more may remain)" if "capacity" in out else ""
    emit(as_json, out, f"erased {out.get('count', 0)} entries under {out['name']}{more}")


@cs_app.command("config", epilog=EXIT_CODES_HELP)
def cs_config(
    capacity: Annotated[int | None, typer.Option(help="maximum number of entries")] = None,
    admit: Annotated[bool | None, typer.Option(help="admit new Data into the store")] = None,
    serve: Annotated[bool | None, typer.Option(help="answer Interests from the store")] = None,
    transport: TransportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Change capacity and policy; options left out keep their value.  Prints the result."""
    mask = (CS_ADMIT if admit is not None else 0) | (CS_SERVE if serve is not None else 0)
    flags = (CS_ADMIT if admit else 0) | (CS_SERVE if serve else 0)
    params: dict[str, Any] = {"capacity": capacity}
    if mask:
        params.update(flags=flags, mask=mask)

    out = with_endpoint("cs config", transport, lambda ep: mc.command(ep, "cs", "config", **params))
    view = _cs_view(out.get("capacity", 0), out.get("flags", 0))
    emit(as_json, view, "cs config: " + " ".join(f"{k}={yes_no(v)}" for k, v in view.items()))


def register(app: typer.Typer) -> None:
    """Add the management commands to the ``icn`` app."""
    app.command("status", epilog=EXIT_CODES_HELP, rich_help_panel=PANEL_MANAGEMENT)(status)
    for name, sub in (("face", face_app), ("route", route_app), ("strategy", strategy_app),
                      ("cs", cs_app)):  # fmt: skip
        app.add_typer(sub, name=name, rich_help_panel=PANEL_MANAGEMENT)
