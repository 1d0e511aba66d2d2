"""The app data plane (DESIGN section 4): flow control, the holding table, the fetcher, the
endpoint and what publishes and fetches named data through it."""
