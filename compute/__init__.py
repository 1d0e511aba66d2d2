"""Named functions (RICE), collectives and stream operators; reach the network through icn."""
