"""lang stage."""
