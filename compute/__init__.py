"""Named functions (RICE), collectives and stream operators. Reaches the network through icn only."""
