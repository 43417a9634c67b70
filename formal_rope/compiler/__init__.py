"""compiler stage."""
