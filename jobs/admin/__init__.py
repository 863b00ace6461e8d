"""The console's data: users, sign-in (passwords, SSO), the console's reads and writes."""
