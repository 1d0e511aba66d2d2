"""The forwarder's families as Prometheus sees them: names and label sets by convention, a face's
counters under its id, never a packet's name in a label."""

from __future__ import annotations

import asyncio
from pathlib import Path

from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from forwarder.observe.metrics import forwarder_registry
from icn.wire.encode import make_interest
from icn.wire.name import from_uri

FACE_FAMILIES = {
    "icn_face_interests": {"face", "direction"},
    "icn_face_data": {"face", "direction"},
    "icn_face_nacks": {"face", "direction"},
    "icn_face_bytes": {"face", "direction"},
    "icn_face_congestion_marks": {"face"},
    "icn_face_shaper_drops": {"face"},
    "icn_face_interests_satisfied": {"face"},
    "icn_face_interests_timed_out": {"face"},
    "icn_face_info": {"face", "remote_uri", "local_uri", "scope"},
}


async def test_names_labels_and_a_unix_face_counted(tmp_path: Path) -> None:
    sock = tmp_path / "f.sock"
    cfg = config_from_dict({"listen": {"unix": str(sock)}, "log_level": "warning"})
    daemon = ForwarderDaemon(cfg)
    await daemon.start(signals=False)
    try:
        reader, writer = await asyncio.open_unix_connection(str(sock))
        n = 3
        for i in range(n):
            # no route: each comes back as a Nack, so the forwarder has counted it by then
            writer.write(make_interest(from_uri(f"/secret/n{i}"), nonce=i.to_bytes(4, "big")))
            await writer.drain()
            assert await asyncio.wait_for(reader.read(9000), 5)
        families = list(forwarder_registry(daemon).collect())
        writer.close()
    finally:
        await daemon.stop()

    by_name = {f.name: f for f in families}
    for family in families:
        assert family.name.startswith("icn_"), family.name
        for sample in family.samples:
            # never a packet's name in a label: the set of series stays bounded
            assert not any("/secret" in v for v in sample.labels.values()), sample
            if family.type == "counter":
                assert sample.name.endswith(("_total", "_created")), sample.name
    for name, labels in FACE_FAMILIES.items():
        assert by_name[name].samples, name
        for sample in by_name[name].samples:
            assert set(sample.labels) == labels, (name, sample.labels)
    info = [s for s in by_name["icn_face_info"].samples if s.labels["remote_uri"].startswith("fd")]
    assert len(info) == 1 and info[0].labels["scope"] == "local"
    face = info[0].labels["face"]
    interests = {
        s.labels["direction"]: s.value
        for s in by_name["icn_face_interests"].samples
        if s.labels["face"] == face
    }
    assert interests == {"in": n, "out": 0}
    nacks_out = [
        s.value
        for s in by_name["icn_face_nacks"].samples
        if s.labels == {"face": face, "direction": "out"}
    ]
    assert nacks_out == [n]
    assert {"icn_process_cpu_seconds", "icn_process_resident_memory_bytes"} <= set(by_name)
