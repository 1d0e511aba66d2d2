"""The live page of a scenario run (``icn scenario run --ui``) and its replay (``icn scenario
view``): a topology with each link's rate, node panels, workloads over time, the timeline."""
