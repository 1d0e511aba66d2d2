"""strategy-choice/set, strategy-choice/unset and the strategy-choice/list dataset.

The Strategy name may carry parameters after its version, as NFD's do
(``/localhost/nfd/strategy/asf/v=5/clone-after~50``): 404 for an unknown strategy or version,
409 for a parameter the strategy refuses (the text names it and the fix); the reply and the list
give the canonical name, parameters included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ndn.encoding import Name

from forwarder.fw.strategy_registry import canonical_name, lookup
from forwarder.mgmt.context import Managed, checked_prefix
from forwarder.mgmt.control import (
    BAD_PARAMS,
    CONFLICT,
    INTERNAL,
    NOT_FOUND,
    ControlError,
    set_name,
)
from forwarder.mgmt.dispatcher import Dispatcher
from icn.errors import ConfigError
from icn.wire.name import from_uri

if TYPE_CHECKING:
    from ndn.app_support.nfd_mgmt import ControlParametersValue
    from ndn.app_support.nfd_mgmt import Strategy as StrategyMsg


def _strategy(name: str) -> StrategyMsg:
    from ndn.app_support.nfd_mgmt import Strategy as StrategyMsg

    msg = StrategyMsg()
    set_name(msg, from_uri(name))
    return msg


def install(dispatcher: Dispatcher, ctx: Managed) -> None:
    def set_choice(params: ControlParametersValue, _requester: int) -> ControlParametersValue:
        from ndn.app_support.nfd_mgmt import ControlParametersValue

        prefix = checked_prefix(params)
        if params.strategy is None or params.strategy.name is None:
            raise ControlError(BAD_PARAMS, "strategy-choice/set needs a Strategy name")
        wanted = Name.to_str(params.strategy.name)
        try:
            lookup(wanted)
        except ConfigError as exc:
            raise ControlError(NOT_FOUND, str(exc)) from None
        try:
            chosen = canonical_name(wanted)
        except ConfigError as exc:  # a bad parameter: NFD cannot instantiate it either
            raise ControlError(CONFLICT, str(exc)) from None
        try:
            ctx.fw.set_strategy(prefix, chosen)
        except ConfigError as exc:
            raise ControlError(INTERNAL, str(exc)) from None
        body = ControlParametersValue()
        set_name(body, prefix)
        body.strategy = _strategy(chosen)
        return body

    def unset_choice(params: ControlParametersValue, _requester: int) -> ControlParametersValue:
        from ndn.app_support.nfd_mgmt import ControlParametersValue

        prefix = checked_prefix(params)
        if not prefix:
            raise ControlError(BAD_PARAMS, "the root prefix always has a strategy; set another")
        ctx.fw.unset_strategy(prefix)
        body = ControlParametersValue()
        set_name(body, prefix)
        return body

    def choice_list(_requester: int, _extra: list[bytes]) -> bytes:
        from ndn.app_support.nfd_mgmt import StrategyChoice, StrategyChoiceMsg

        msg = StrategyChoiceMsg()
        msg.strategy_choices = []
        for prefix, strategy in sorted(ctx.fw.strategy_choice, key=lambda item: item[0]):
            sc = StrategyChoice()
            set_name(sc, prefix)
            sc.strategy = _strategy(strategy.full_name)
            msg.strategy_choices.append(sc)
        return bytes(msg.encode())

    dispatcher.add_command("strategy-choice", "set", set_choice)
    dispatcher.add_command("strategy-choice", "unset", unset_choice)
    dispatcher.add_dataset("strategy-choice", "list", choice_list)
