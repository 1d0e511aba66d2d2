"""NFD management protocol: dispatcher, command validation, RIB and the management modules."""
