"""What a forwarder shows of itself: its Prometheus metrics and its packet capture."""
