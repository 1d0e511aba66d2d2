"""The RICE layer's parts without a network: names, envelopes, declarations, policies, jobs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from compute.rmi import function
from compute.rmi.client import split_function
from compute.rmi.credential import build_credential, check_credential
from compute.rmi.errors import (
    BadArguments,
    NoSuchFunction,
    ProtocolError,
    RemoteError,
    Unauthorized,
)
from compute.rmi.functions import collect, spec_of
from compute.rmi.jobs import JobRunner
from compute.rmi.policy import Caller, allow_keys, from_file, resolve_policy
from compute.rmi.wire import (
    call_digest,
    envelope,
    error_envelope,
    memo_name,
    open_envelope,
    pack_args,
    split_service_name,
    unpack_args,
)
from icn.errors import ConfigError, DecodeError
from icn.security.keys import Identity
from icn.wire.name import from_uri, to_uri
from icn.wire.packet import parse_data
from icn.wire.serialize import pack
from tests.virtual_time import virtual_time


def test_function_names_and_split() -> None:
    assert split_function("/lab/svc/fn") == (from_uri("/lab/svc"), "fn")
    for bad in ("/fn", "fn", "/svc/_thunk", ""):
        with pytest.raises(ValueError):
            split_function(bad)
    assert to_uri(memo_name(from_uri("/svc"), "add", "ab")) == "/svc/add/_memo/ab"
    parts = split_service_name(from_uri("/svc"), from_uri("/svc/a/b"))
    assert parts is not None and len(parts) == 2
    assert split_service_name(from_uri("/svc"), from_uri("/other/a")) is None


def test_argument_blobs_are_canonical() -> None:
    a = pack_args((1, 2), {"y": 1, "x": 2})
    b = pack_args((1, 2), {"x": 2, "y": 1})
    assert a == b and call_digest("f", a) == call_digest("f", b) != call_digest("g", a)
    assert unpack_args(a) == ([1, 2], {"x": 2, "y": 1})
    for bad in (pack([1]), pack({"a": 1}), pack([[1], {1: 2}]), b"\xc1"):
        with pytest.raises(DecodeError):
            unpack_args(bad)


def test_envelopes_carry_typed_errors() -> None:
    assert open_envelope(envelope("ok", r=b"x"))["r"] == b"x"
    with pytest.raises(RemoteError) as info:
        open_envelope(error_envelope(RemoteError("KeyError", "'k'", "f", "tb")), "/s/f")
    assert info.value.remote_type == "KeyError" and info.value.remote_traceback == "tb"
    with pytest.raises(Unauthorized):
        open_envelope(error_envelope(Unauthorized("no")))
    with pytest.raises(NoSuchFunction):
        open_envelope(error_envelope(NoSuchFunction("no")))
    for junk in (b"", b"\xc1", pack([1]), pack({"v": 99, "s": "ok"})):
        with pytest.raises(ProtocolError):
            open_envelope(junk)


def test_decorator_declares_and_collects() -> None:
    @function(name="renamed", pure=True, duration=2.0)
    def f(x: int) -> int:
        return x

    spec = spec_of(f)
    assert spec is not None and spec.name == "renamed" and spec.pure and spec.run == "thread"
    assert f(3) == 3  # still an ordinary function
    with pytest.raises(ValueError):
        function(name="_private")(lambda: None)
    with pytest.raises(ConfigError, match="coroutine"):

        @function(cpu_bound=True)
        async def g() -> None: ...

    with pytest.raises(ConfigError, match="cannot import"):
        collect("no.such.module")
    with pytest.raises(ConfigError, match="declares no functions"):
        collect("json")
    assert "echo" in collect("tests.integration.rmi.funcs")


def test_policies(tmp_path: Path) -> None:
    me, other = Identity.generate(), Identity.generate()
    mine = Caller(me.public_bytes)
    assert mine.fingerprint == me.fingerprint
    policy = allow_keys([me.fingerprint[:16]])
    assert policy(mine) and not policy(Caller(other.public_bytes))
    with pytest.raises(ConfigError, match="fingerprint"):
        allow_keys(["abc"])
    keys = tmp_path / "authorized"
    keys.write_text(f"# friends\n{me.fingerprint}\n")
    assert from_file(keys)(mine) and not from_file(keys)(Caller(other.public_bytes))
    keys.write_text("not a key\n")
    with pytest.raises(ConfigError, match=":1:"):
        from_file(keys)
    assert resolve_policy("anyone")(mine) and not resolve_policy("nobody")(mine)
    with pytest.raises(ConfigError, match="anyone"):
        resolve_policy("everyone")


@virtual_time  # a duration learnt from a run is the function's, not the CPU's
async def test_jobs_learn_durations_and_report_failures() -> None:
    @function(duration=10.0)
    async def quick() -> int:
        await asyncio.sleep(0.01)
        return 7

    @function
    def broken() -> None:
        raise KeyError("k")

    runner = JobRunner()
    try:
        spec = spec_of(quick)
        assert spec is not None
        job = runner.start(spec, [], {})
        now = asyncio.get_running_loop().time()
        assert job.eta(now) == pytest.approx(10.0) and not job.done
        finished = asyncio.get_running_loop().create_future()
        job.callbacks.append(lambda j: finished.set_result(j.outcome))
        assert await asyncio.wait_for(finished, 5) == 7
        assert job.done and job.eta(now) == 0.0
        assert runner.estimate(spec) == pytest.approx(0.01)  # learnt from the run
        bad_spec = spec_of(broken)
        assert bad_spec is not None
        bad = runner.start(bad_spec, [], {})
        done = asyncio.get_running_loop().create_future()
        bad.callbacks.append(lambda j: done.set_result(j.outcome))
        outcome = await asyncio.wait_for(done, 5)
        assert isinstance(outcome, RemoteError) and outcome.remote_type == "KeyError"
        assert "broken" in outcome.remote_traceback
    finally:
        await runner.close()


def test_bounded_store_caps_entries_bytes_and_age() -> None:
    from compute.rmi.store import BoundedStore

    store: BoundedStore[str, int] = BoundedStore("s", max_entries=3, max_bytes=100, ttl=10.0)
    for i in range(5):
        store.put(f"k{i}", i, now=0.0, size=10)
    assert len(store) == 3 and store.get("k0", 1.0) is None and store.get("k4", 1.0) == 4
    assert store.counters["s.evicted"] == 2
    store.put("big", 9, now=1.0, size=95)  # over the byte budget: the oldest go
    assert store.bytes <= 100 and store.get("big", 1.0) == 9
    assert store.get("big", 11.5) is None and store.counters["s.expired"] >= 1
    lru: BoundedStore[str, int] = BoundedStore("l", max_entries=2, lru=True)
    lru.put("a", 1, 0.0)
    lru.put("b", 2, 0.0)
    assert lru.get("a", 0.0) == 1  # a is now the most recent
    lru.put("c", 3, 0.0)
    assert lru.get("b", 0.0) is None and lru.get("a", 0.0) == 1


def test_scenario_caller_arguments_are_checked() -> None:
    from apps.rmi_entries import call_arguments

    assert call_arguments({"function": "/s/f", "args": [1], "kwargs": {"x": 2}}) == (
        "/s/f",
        (1,),
        {"x": 2},
    )
    assert call_arguments({"function": "/s/f"}) == ("/s/f", (), {})
    for bad, field in (
        ({"function": "f"}, "args.function"),
        ({"function": "/s/f", "args": "abc"}, "args.args"),
        ({"function": "/s/f", "kwargs": [1]}, "args.kwargs"),
    ):
        with pytest.raises(SystemExit, match=field):
            call_arguments(bad)


@pytest.mark.parametrize(
    ("limit", "ok"),
    [(4 << 20, True), (None, True), (-1, False), (float("inf"), False), ("big", False)],
)
def test_a_credentials_answer_limit_is_checked(limit: object, ok: bool) -> None:
    # the caller's path limit (field m) sizes the answer: a malformed one is BadArguments
    # before any work, never an error inside the server
    name = from_uri("/rnp/hello")
    wire = build_credential(
        Identity.generate(),
        name,
        function="fn",
        rnp_key=b"k",
        ephemeral=b"",
        private=False,
        size=1,
        payload=b"x",
        inline=True,
        answer_limit=limit,  # type: ignore[arg-type]
    )
    if ok:
        cred = check_credential(parse_data(wire), function="fn", rnp_key=b"k")
        assert cred.answer_limit == limit
    else:
        with pytest.raises(BadArguments):
            check_credential(parse_data(wire), function="fn", rnp_key=b"k")
