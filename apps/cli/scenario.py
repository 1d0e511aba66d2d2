"""``icn scenario run|validate|clean``: launch a topology and an experiment from one YAML file."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from icn.errors import ConfigError, IcnError

scenario_app = typer.Typer(
    no_args_is_help=True,
    help="Run topologies and experiments described in scenario YAML files.\n\n"
    "Exit codes: 0 ran and every expectation held; 1 an expectation failed or a part of the "
    "run failed; 2 the file is invalid; 130 interrupted (everything started was stopped).",
)

EXIT_FAILED, EXIT_INVALID, EXIT_INTERRUPTED = 1, 2, 130


class _PageUnavailable(Exception):
    """--ui cannot serve (its port is taken): the command line's mistake, exit 2; a
    ConfigError from the run itself (a cluster's address) stays a failed run, exit 1."""


def _load(path: Path) -> Any:
    from apps.scenario.loader import load_scenario

    try:
        return load_scenario(path)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None


@scenario_app.command("validate")
def validate(file: Annotated[Path, typer.Argument(help="scenario YAML file")]) -> None:
    """Check a scenario file without starting anything."""
    from apps.scenario.chaos import plan_lines

    sc = _load(file)
    typer.echo(
        f"{file}: OK: {len(sc.nodes)} nodes, {len(sc.links)} links, {len(sc.services)} services, "
        f"{len(sc.workloads)} workloads, {len(sc.faults)} faults, {sc.duration:g}s"
    )
    for line in plan_lines(sc):
        typer.echo(line)


@scenario_app.command("run")
def run(
    file: Annotated[Path, typer.Argument(help="scenario YAML file")],
    backend: Annotated[
        str | None,
        typer.Option(help="local (default, no root), netns (root) or ray (a Ray cluster)"),
    ] = None,
    # not --address: that reads as the forwarder's, which commands name --transport
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="the Ray cluster's head, HOST:PORT or auto, for --backend ray (else $RAY_ADDRESS)",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="directory for the report, plots and logs")
    ] = None,
    plots: Annotated[bool, typer.Option(help="write PNG plots")] = True,
    ui: Annotated[
        str | None,
        typer.Option(
            help="serve the live page on [HOST:]PORT while the run lasts (HOST 127.0.0.1; 0: any)"
        ),
    ] = None,
) -> None:
    """Run a scenario: a live view while it runs, then a summary, report.json and plots."""
    from apps.scenario.chaos import plan_lines
    from apps.scenario.report import write_report
    from apps.scenario.runner import ScenarioFailed, ScenarioRunner, default_out_dir
    from apps.scenario.summary import render_summary

    sc = _load(file)
    if backend not in (None, "local", "netns", "ray"):
        typer.echo(f"error: --backend {backend!r}: use local, netns or ray", err=True)
        raise typer.Exit(EXIT_INVALID)
    if ray_address is not None and (backend or sc.backend) != "ray":
        typer.echo("error: --ray-address is the Ray cluster's: use it with --backend ray", err=True)
        raise typer.Exit(EXIT_INVALID)
    if ui is not None:
        from apps.scenario.ui.server import parse_ui_address

        try:  # a mistake in --ui is said before anything starts
            parse_ui_address(ui)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_INVALID) from None
    console = Console()
    out_dir = out or default_out_dir(sc)
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:>5.1f}/{task.total:g}s"),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )

    def on_event(t: float | None, text: str) -> None:
        when = "   setup" if t is None else f"{t:7.2f}s"
        progress.console.print(f"[dim]{when}[/] {text}")

    try:  # the file with --backend: e.g. nodes_per_process above 1 on netns
        runner = ScenarioRunner(
            sc, out_dir, backend=backend, on_event=on_event, address=ray_address
        )
    except ConfigError as exc:
        typer.echo(f"error: {file}: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    console.print(
        f"[bold]scenario {sc.name}[/]: run {runner.run_id}, {runner.backend_kind} backend, "
        f"output in {out_dir}"
    )
    for line in plan_lines(sc):
        console.print(line, highlight=False)

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        bar = progress.add_task(sc.name, total=sc.duration, stats="")

        async def tick() -> None:
            while True:
                ok, failed = runner.live_counts()
                stats = f"[green]{ok:,} ok[/] [red]{failed:,} failed[/]" if ok or failed else ""
                progress.update(bar, completed=min(sc.duration, runner.now()), stats=stats)
                await asyncio.sleep(0.25)

        page = None
        if ui is not None:
            from apps.scenario.ui.server import LiveSource, start_ui

            try:
                page = await start_ui(LiveSource(runner, file.parent), ui)
            except ConfigError as exc:  # e.g. its port is taken: nothing has started yet
                raise _PageUnavailable(str(exc)) from None
            progress.console.print(f"live page: {page.url}", highlight=False)
        ticker = asyncio.ensure_future(tick())
        try:
            return await runner.run()
        finally:
            ticker.cancel()
            if page is not None:
                await page.close()

    try:
        with progress:
            report = asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        console.print(f"[yellow]interrupted[/]: every process stopped; logs in {out_dir}/logs")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except _PageUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    except (ScenarioFailed, IcnError, OSError) as exc:
        console.print(f"[red]error[/]: {exc}\nlogs in {out_dir}/logs")
        raise typer.Exit(EXIT_FAILED) from None
    render_summary(report, console)
    paths = write_report(report, out_dir, plots=plots)
    paths.append(write_timeline(runner, out_dir, file.parent, report))
    console.print("wrote " + ", ".join(str(p) for p in paths))
    if not report.get("passed", True):
        raise typer.Exit(EXIT_FAILED)


def write_timeline(runner: Any, out_dir: Path, scenario_dir: Path, report: dict[str, Any]) -> Path:
    """``timeline.json``: what ``icn scenario view`` replays."""
    from apps.scenario.ui.server import timeline
    from apps.scenario.ui.timeline_file import write_timeline as write

    return write(timeline(runner, scenario_dir, report), out_dir)


@scenario_app.command("view")
def view(
    run_dir: Annotated[
        Path, typer.Argument(help="a run's output directory (it has timeline.json)")
    ],
    ui: Annotated[
        str, typer.Option(help="serve the page on [HOST:]PORT (HOST 127.0.0.1; 0: any)")
    ] = "127.0.0.1:8080",
) -> None:
    """Replay a finished run on the live page, from the timeline.json it wrote; Ctrl-C stops."""
    from apps.scenario.ui.server import ReplaySource, parse_ui_address, start_ui
    from apps.scenario.ui.timeline_file import read_timeline

    try:
        parse_ui_address(ui)
        data = read_timeline(run_dir)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None

    async def serve() -> None:
        page = await start_ui(ReplaySource(data), ui)
        typer.echo(f"replaying {run_dir} on {page.url} (Ctrl-C stops)")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await page.close()

    try:
        asyncio.run(serve())
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None


@scenario_app.command("clean")
def clean(
    dry_run: Annotated[bool, typer.Option(help="only list what would be removed")] = False,
) -> None:
    """Remove what crashed runs left: their processes (by PID), namespaces and sockets."""
    from apps.scenario.runs import clean as clean_runs

    removed = clean_runs(dry_run=dry_run)
    for line in removed:
        typer.echo(line)
    if not removed:
        typer.echo("nothing to clean")
