"""Scenario files and their launcher: a topology and an experiment in one YAML file.

``schema`` holds the file format, ``loader`` reads and validates it, ``runner`` runs it on a
backend (``backend`` for the local one, ``netns`` for network namespaces) and ``report`` writes
what happened.
"""
