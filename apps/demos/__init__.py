"""Demo code the shipped scenarios run (scenarios/*.yaml name these modules), kept apart from
the CLI, the scenario launcher and the integrations: functions to serve
(:mod:`apps.demos.demo_functions`, :mod:`apps.demos.replica_functions`), stream functions
(:mod:`apps.demos.stream_demo`), the digits MLP of the training scenarios
(:mod:`apps.demos.digits_mlp`) and a plain DDP script (:mod:`apps.demos.ddp_example`).

They are installed with the project, not in examples/: a scenario's processes import them by
module name on every backend (local, netns, a Ray cluster's machines).  The short scripts a
user reads first are in examples/.
"""
