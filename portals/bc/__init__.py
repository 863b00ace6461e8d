"""BC Registries: Name Request and incorporation flows, and their stand-in."""
