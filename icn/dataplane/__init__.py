"""The app data plane (docs/design.md section 4): flow control, the holding table, the fetcher, the
endpoint and what publishes and fetches named data through it."""
