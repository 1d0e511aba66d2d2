"""The forwarder's tables: FIB, PIT, content store, Dead Nonce List, strategy choice, and the
reflexive table (reverse-path state of Trigger Interests).

Sans-IO: plain data structures keyed by name bytes, time passed in as ``now`` (seconds, monotonic
clock), every table bounded by :class:`~forwarder.table.limits.TableLimits` and counting what it
refuses or evicts in the daemon's shared counter bag.
"""
