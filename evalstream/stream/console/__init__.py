"""What the command line prints: consoles, the check table, load warnings and bounded
rejection reports."""
