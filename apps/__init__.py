"""Command-line interface, scenario launcher and demo programs."""
