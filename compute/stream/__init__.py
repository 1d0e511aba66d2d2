"""An IceFlow-like stream operator graph over named data (docs/design.md section 8).

Each operator instance publishes its output as named, sequenced batches
``/<flow>/<op>/<partition>/seq=N``; downstream instances pull them with an adaptive window of
Interests, in order, exactly once.  Several consumers of one stream share it through PIT
aggregation and content stores.

Run a graph (a YAML file, or the same mapping built in Python with :func:`parse_graph`)::

    from compute.stream import FlowRun, load_graph
    from icn.dataplane.endpoint import Endpoint

    graph = load_graph("examples/stream_graph.yaml")      # GraphError names every problem
    flow = FlowRun(graph, lambda: Endpoint.connect(uri))  # a face per operator instance
    await flow.start()
    await flow.wait(timeout=30)                           # until every sink has ended
    await flow.stop()

``icn flow run GRAPH.yaml`` does the same from the command line; ``FlowRun(graph, connect,
which)`` runs only some instances (a node's share of a graph spread over machines).
"""

from compute.stream.errors import GraphError, StreamError
from compute.stream.flow import FlowRun
from compute.stream.graph import Graph, load_graph, parse_graph

__all__ = [
    "FlowRun",
    "Graph",
    "GraphError",
    "StreamError",
    "load_graph",
    "parse_graph",
]
