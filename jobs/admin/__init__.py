"""The console's data: users, sign-in (passwords, SSO), the audit log, the console's reads and
writes."""
