"""``icn tasks``: run an executor of the task platform, and see the executors' state."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from apps.cli.common import EXIT_USAGE, JsonOpt, connected, fail, run
from apps.cli.options import TransportOpt
from compute.rmi.identity import resolve_identity
from icn.errors import ConfigError

tasks_app = typer.Typer(
    help="Tasks and actors on named functions: executors and their state.",
    no_args_is_help=True,
)


@tasks_app.command("executor")
def executor(
    node_id: Annotated[
        str, typer.Option("--id", help="this executor's name: it serves /cfn/node/ID")
    ],
    module: Annotated[
        list[str],
        typer.Option(
            "--module",
            help="module whose @task functions and @actor classes it may run (repeatable; "
            "pkg.mod, importable from the current directory or PYTHONPATH)",
        ),
    ],
    num_cpus: Annotated[
        float, typer.Option(help="CPU slots: tasks run at once (each takes its num_cpus)")
    ] = 1.0,
    memory_mb: Annotated[
        float,
        typer.Option(help="MiB for tasks that ask for memory (0: not limited)"),
    ] = 0.0,
    store_mb: Annotated[
        float, typer.Option(help="MiB of results kept (oldest dropped beyond)")
    ] = 1024.0,
    key: Annotated[
        Path | None,
        typer.Option("--key", help="Ed25519 identity file signing its answers", show_default=False),
    ] = None,
    authorize: Annotated[
        list[str] | None,
        typer.Option(
            help="who may run tasks here: a caller's key fingerprint (repeatable), or one of "
            "anyone, nobody, file:PATH (authorized keys); default anyone"
        ),
    ] = None,
    transport: TransportOpt = None,
) -> None:
    """Run an executor until SIGINT/SIGTERM.

    Prints "tasks executor ready: ..." once /cfn/node/ID is registered, its counters at exit.
    """
    from compute.tasks.executor import Executor, ExecutorConfig, run_executor
    from compute.tasks.names import check_node_id

    if num_cpus <= 0 or memory_mb < 0 or store_mb <= 0:
        fail("--num-cpus and --store-mb must be positive and --memory-mb >= 0", EXIT_USAGE)
    try:
        check_node_id(node_id)
        sys.path.insert(0, ".")
        for name in module:
            __import__(name)
        identity = resolve_identity(key)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    except ImportError as exc:
        fail(f"--module: cannot import {exc.name or exc}: {exc}", EXIT_USAGE)
    policy: str | list[str] = "anyone"
    if authorize:
        keyword = authorize[0] in ("anyone", "nobody") or authorize[0].startswith("file:")
        if keyword and len(authorize) > 1:
            fail(f"--authorize {authorize[0]} stands alone: give it once", EXIT_USAGE)
        policy = authorize[0] if keyword else list(authorize)
    try:
        from compute.rmi.policy import resolve_policy

        resolve_policy(policy)
    except ConfigError as exc:
        fail(f"--authorize: {exc}", EXIT_USAGE)
    config = ExecutorConfig(
        authorize=policy,
        node_id=node_id,
        modules=frozenset(module),
        num_cpus=num_cpus,
        memory=int(memory_mb * (1 << 20)),
        store_bytes=int(store_mb * (1 << 20)),
    )

    async def main() -> dict[str, int]:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

        def ready(ex: Executor) -> None:
            typer.echo(
                f"tasks executor ready: {ex.prefix} ({num_cpus:g} CPUs, modules "
                f"{', '.join(sorted(config.modules))})",
            )

        return await run_executor(config, transport, identity=identity, ready=ready, stop=stop)

    counters = run("tasks executor", main)
    typer.echo("tasks executor stopped: " + json.dumps(counters, sort_keys=True))


@tasks_app.command("status")
def status(json_out: JsonOpt = False, transport: TransportOpt = None) -> None:
    """The executors the forwarder routes to: load, running tasks, actors, results kept."""

    async def main() -> list[dict[str, Any]]:
        from compute.rmi.client import Client
        from compute.tasks.names import node_of, node_prefix
        from icn.dataplane.mgmt_client import status as dataset

        async with connected(transport) as ep:
            fib = await dataset(ep, "fib/list")
            nodes = sorted({n for e in fib if (n := node_of(str(e.get("name", "")))) is not None})
            client = Client(ep, timeout=5.0)
            found: list[dict[str, Any]] = []
            for node in nodes:
                try:
                    found.append(await client.call(node_prefix(node) + "/status"))
                except Exception as exc:  # a driver's route, or an executor gone: say so
                    found.append({"node": node, "error": str(exc)})
            return found

    found = run("tasks status", main)
    if json_out:
        typer.echo(json.dumps(found, sort_keys=True))
        return
    if not found:
        typer.echo("no executors (none registered /cfn/node/ID at this forwarder)")
        return
    typer.echo(
        f"{'executor':<12} {'cpus':>5} {'load':>5} {'ran':>7} {'objects':>8} {'MiB':>8}"
        "  running / actors"
    )
    for e in found:
        if "error" in e:
            typer.echo(f"{e['node']:<12} unreachable: {e['error']}")
            continue
        ran = sum(e["ran"].values())
        running = ", ".join(e["running"][:4]) or "-"
        actors = len(e["actors"])
        typer.echo(
            f"{e['node']:<12} {e['num_cpus']:>5g} {e['in_progress']:>5} {ran:>7} "
            f"{e['objects']:>8} {e['object_bytes'] / (1 << 20):>8.1f}  {running} / {actors} actors"
        )


def register(app: typer.Typer) -> None:
    from apps.cli.options import PANEL_FUNCTIONS

    app.add_typer(tasks_app, name="tasks", rich_help_panel=PANEL_FUNCTIONS)
