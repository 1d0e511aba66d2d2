"""What a process shows of itself while it runs: its metrics endpoint."""
