"""An IceFlow-like stream operator graph over named data (DESIGN section 8).

Each operator instance publishes its output as named, sequenced batches
``/<flow>/<op>/<partition>/seq=N``; downstream instances pull them with an adaptive window of
Interests, in order, exactly once.  Several consumers of one stream share it through PIT
aggregation and content stores.
"""
