"""Wire format, names, security and the application endpoint (imports nothing of ours)."""
