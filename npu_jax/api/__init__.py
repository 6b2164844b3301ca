"""The public entry points: arguments checked once at the boundary, then a plan launched."""
