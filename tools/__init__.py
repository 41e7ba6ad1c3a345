"""Developer tools for kbroker (code generation, capture tools); not installed."""
