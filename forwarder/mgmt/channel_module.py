"""The faces/channels dataset: one ChannelStatus per listener, as NFD lists its channels.

``nfdc channel list`` and the end of ``nfdc status report`` read it.  python-ndn has no model
for it, so the two TLVs are declared here (NFD management protocol: ChannelStatus 130 holding
LocalUri 129).
"""

from __future__ import annotations

from ndn.encoding import BytesField, ModelField, RepeatedField, TlvModel

from forwarder.mgmt.context import Managed
from forwarder.mgmt.dispatcher import Dispatcher

CHANNEL_STATUS = 0x82
LOCAL_URI = 0x81


class ChannelStatus(TlvModel):  # type: ignore[misc]  # python-ndn's models are untyped
    local_uri = BytesField(LOCAL_URI)


class ChannelStatusMsg(TlvModel):  # type: ignore[misc]
    channel_status = RepeatedField(ModelField(CHANNEL_STATUS, ChannelStatus))


def encode_channels(uris: list[str]) -> bytes:
    msg = ChannelStatusMsg()
    msg.channel_status = []
    for uri in uris:
        ch = ChannelStatus()
        ch.local_uri = uri.encode()
        msg.channel_status.append(ch)
    return bytes(msg.encode())


def install(dispatcher: Dispatcher, ctx: Managed) -> None:
    def channels(_requester: int, _extra: list[bytes]) -> bytes:
        return encode_channels([listener.local_uri for listener in ctx.faces.listeners])

    dispatcher.add_dataset("faces", "channels", channels)
