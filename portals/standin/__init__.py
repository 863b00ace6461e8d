"""Local stand-ins for the government portals, faithful to each portal's page in docs/portals/."""
