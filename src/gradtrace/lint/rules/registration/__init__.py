"""GT4xx: registration and optimizer wiring."""
