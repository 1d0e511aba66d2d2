"""Forwarder configuration: validation messages name the field and the fix; flags merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apps.cli import build_fwd_config
from forwarder.config import config_from_dict, load_config, parse_host_port
from forwarder.daemon import table_limits
from icn.errors import ConfigError


def test_unknown_field_and_bad_address_are_named() -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict({"listen": {"udp": ["1.2.3:99"]}, "tabels": {}})
    msg = str(err.value)
    assert "listen.udp" in msg and "HOST:PORT" in msg
    assert "tabels: unknown field" in msg


def test_route_must_name_a_static_face() -> None:
    with pytest.raises(ConfigError, match=r"routes\[0\]\.face: .*add it under 'faces:'"):
        config_from_dict(
            {
                "faces": [{"uri": "udp4://127.0.0.1:7000"}],
                "routes": [{"prefix": "/a", "face": "udp4://127.0.0.1:7001"}],
            }
        )


def test_bad_prefix_and_shaper_values_are_rejected() -> None:
    with pytest.raises(ConfigError, match=r"routes\[0\]\.prefix: invalid NDN name"):
        config_from_dict(
            {
                "faces": [{"uri": "udp4://127.0.0.1:7000"}],
                "routes": [{"prefix": "/sha256digest=ab", "face": "udp4://127.0.0.1:7000"}],
            }
        )
    with pytest.raises(ConfigError, match=r"faces\[0\]\.shaper\.loss: .* \(got 2\.0\)"):
        config_from_dict({"faces": [{"uri": "udp4://127.0.0.1:7000", "shaper": {"loss": 2}}]})
    with pytest.raises(ConfigError, match=r"faces\[0\]\.uri: .*use udp4://HOST:PORT"):
        config_from_dict({"faces": [{"uri": "http://127.0.0.1:7000"}]})


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("log_level: info\nlisten: [1\n")
    with pytest.raises(
        ConfigError, match=r"bad\.yaml:3:1: \(top level\): not valid YAML: expected ',' or ']'"
    ):
        load_config(bad)
    with pytest.raises(
        ConfigError, match=r"missing\.yaml: cannot read the config file: No such file"
    ):
        load_config(tmp_path / "missing.yaml")
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(
        ConfigError, match=r"scalar\.yaml:1:1: \(top level\): the top level must be a mapping"
    ):
        load_config(scalar)


def test_a_config_written_as_json_reads_as_its_yaml(tmp_path: Path) -> None:
    settings = {"listen": {"udp": ["127.0.0.1:7000"]}, "tables": {"pit_max_entries": 10}}
    as_yaml, as_json = tmp_path / "a.yaml", tmp_path / "b.yaml"
    as_yaml.write_text("listen: {udp: ['127.0.0.1:7000']}\ntables: {pit_max_entries: 10}\n")
    as_json.write_text(json.dumps(settings))
    assert load_config(as_json) == load_config(as_yaml)
    assert load_config(as_json).tables.pit_max_entries == 10
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tables": {"pit_max_entries": 0}}))
    with pytest.raises(ConfigError, match=r"tables\.pit_max_entries: Input should be greater"):
        load_config(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('{"tables":\n  [1, }')
    with pytest.raises(ConfigError, match=r"broken\.json:2:7: \(top level\): not valid YAML"):
        load_config(broken)


def test_flags_override_the_file_and_create_faces_for_routes(tmp_path: Path) -> None:
    cfg = tmp_path / "fwd.yaml"
    cfg.write_text("listen: {udp: ['127.0.0.1:6363']}\ntables: {pit_max_entries: 10}\n")
    merged = build_fwd_config(
        cfg,
        "/tmp/x.sock",
        [],
        ["127.0.0.1:6364"],
        7,
        "debug",
        [],
        ["/app=udp4://127.0.0.1:7000"],
        ["/sync=multicast"],
    )
    assert merged.listen.udp == ["127.0.0.1:6363"]
    assert merged.listen.tcp == ["127.0.0.1:6364"]
    assert merged.listen.unix == "/tmp/x.sock"
    assert merged.tables.cs_max_entries == 7 and merged.tables.pit_max_entries == 10
    assert merged.log_level == "debug"
    assert [f.uri for f in merged.faces] == ["udp4://127.0.0.1:7000"]
    assert merged.routes[0].prefix == "/app"
    assert merged.strategies[0].strategy == "multicast"
    limits = table_limits(merged)
    assert limits.cs_max_entries == 7 and limits.dnl_lifetime == 6.0


def test_host_port_forms() -> None:
    assert parse_host_port("127.0.0.1:1") == ("127.0.0.1", 1)
    assert parse_host_port("[::1]:6363") == ("::1", 6363)
    assert parse_host_port("127.0.0.1") == ("127.0.0.1", 6363)
    with pytest.raises(ValueError, match="out of range"):
        parse_host_port("127.0.0.1:70000")


def test_listen_defaults_apply_only_when_the_section_is_absent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/tmp/xdg-test")
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    default = config_from_dict({}).effective_listen
    assert default.tcp == ["127.0.0.1:6363"] and default.udp == ["127.0.0.1:6363"]
    assert default.unix == "/tmp/xdg-test/icn-fwd.sock"
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert config_from_dict({}).effective_listen.unix == "/run/nfd/nfd.sock"
    given = config_from_dict({"listen": {"udp": ["127.0.0.1:7000"]}}).effective_listen
    assert given.udp == ["127.0.0.1:7000"] and given.tcp == [] and given.unix is None
    flags = build_fwd_config(None, None, ["127.0.0.1:7001"], [], None, None, [], [], [])
    assert flags.effective_listen.tcp == [] and flags.effective_listen.unix is None
    no_flags = build_fwd_config(None, None, [], [], None, None, [], [], [])
    assert no_flags.effective_listen.unix == "/run/nfd/nfd.sock"


def test_local_networks_must_be_cidr() -> None:
    assert config_from_dict({}).local_networks == ["127.0.0.0/8", "::1/128"]
    with pytest.raises(ConfigError, match=r"local_networks.*CIDR form"):
        config_from_dict({"local_networks": ["loopback"]})


def test_flood_bounds_are_configurable_and_checked() -> None:
    cfg = config_from_dict(
        {"tables": {"face_share": 0.5, "local_reserve": 0.2, "interest_lifetime_max_ms": 9000}}
    )
    limits = table_limits(cfg)
    assert (limits.face_share, limits.local_reserve) == (0.5, 0.2)
    assert limits.interest_lifetime_max_ms == 9000
    for field, value in (("face_share", 0), ("local_reserve", 1), ("interest_lifetime_max_ms", 0)):
        with pytest.raises(ConfigError, match=f"tables.{field}"):
            config_from_dict({"tables": {field: value}})


def test_a_duration_with_units_in_a_milliseconds_field_is_converted_for_the_user() -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict({"tables": {"dnl_lifetime_ms": "6s"}, "tick_ms": "1.5"})
    msg = str(err.value)
    assert "tables.dnl_lifetime_ms: a whole number of milliseconds; write 6000 for '6s'" in msg
    # a bare number is milliseconds here: no seconds-based hint for it
    assert "tick_ms: Input should be a valid integer" in msg and "write 1500" not in msg


def test_udp_max_packet_defaults_to_ndn_size_and_reaches_the_face_table() -> None:
    from forwarder.daemon import ForwarderDaemon
    from icn.wire import tlv_types as T

    assert config_from_dict({}).udp_max_packet == T.MAX_PACKET_SIZE
    config = config_from_dict({"udp_max_packet": 128 << 10})
    assert ForwarderDaemon(config).faces.udp_max_packet == 128 << 10
    for value in (T.MAX_PACKET_SIZE - 1, T.MAX_LOCAL_PACKET_SIZE + 1, "big"):
        with pytest.raises(ConfigError, match="udp_max_packet"):
            config_from_dict({"udp_max_packet": value})
