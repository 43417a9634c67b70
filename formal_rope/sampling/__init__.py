"""sampling stage."""
