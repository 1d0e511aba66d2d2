"""The forwarder daemon: tables, pipelines, faces and management."""
