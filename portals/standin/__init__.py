"""Local stand-ins for the government portals, faithful to ../shared/portal-facts.md."""
